// The client battery for tedious (the Node.js TDS driver), run by test_tedious.py.
// Usage: NODE_PATH=<dir with tedious> node tedious_battery.js HOST PORT PASSWORD CERT_PEM
// Prints one line per check: "CHECK <name> OK <detail>" or "CHECK <name> FAIL <what went wrong>".
"use strict";
const { Connection, Request, TYPES, ISOLATION_LEVEL } = require("tedious");

const fs = require("fs");
const [host, port, password, certificate] = process.argv.slice(2);

function connect(options = {}) {
  const config = {
    server: host,
    authentication: { type: "default", options: { userName: "sa", password } },
    options: {
      port: Number(port),
      database: "clientdb",
      trustServerCertificate: true, // the simulator's certificate is self-signed
      connectTimeout: 10000,
      requestTimeout: 60000,
      ...options,
    },
  };
  return new Promise((resolve, reject) => {
    const conn = new Connection(config);
    conn.on("connect", (err) => (err ? reject(err) : resolve(conn)));
    conn.connect();
  });
}

// run sql; resolves to {rows: [[value...]], rowCount, infos}
function query(conn, sql, params = []) {
  return new Promise((resolve, reject) => {
    const rows = [];
    const infos = [];
    const onInfo = (info) => infos.push(info.number);
    conn.on("infoMessage", onInfo);
    const request = new Request(sql, (err, rowCount) => {
      conn.removeListener("infoMessage", onInfo);
      if (err) reject(err);
      else resolve({ rows, rowCount, infos });
    });
    for (const [name, type, value] of params) request.addParameter(name, type, value);
    request.on("row", (columns) => rows.push(columns.map((c) => c.value)));
    conn.execSql(request);
  });
}

const call = (conn, method, ...args) =>
  new Promise((resolve, reject) => conn[method]((err) => (err ? reject(err) : resolve()), ...args));

async function check(name, body) {
  try {
    const detail = await body();
    console.log(`CHECK ${name} OK ${detail === undefined ? "" : String(detail).replace(/\n/g, " ")}`);
  } catch (e) {
    console.log(`CHECK ${name} FAIL ${e && (e.number ? e.number + " " : "") + (e.message || e)}`.replace(/\n/g, " "));
  }
}

async function main() {
  await check("login_tls_default", async () => {
    const conn = await connect();
    const r = await query(conn, "SELECT DB_NAME(), @@VERSION");
    conn.close();
    return `${r.rows[0][0]} ${r.rows[0][1].split(" - ")[1].split(" ")[0]}`;
  });
  await check("login_without_tls_request", async () => {
    const conn = await connect({ encrypt: false });
    const r = await query(conn, "SELECT 1");
    conn.close();
    return r.rows[0][0];
  });
  await check("login_strict_tds8", async () => {
    // TDS 8.0 validates the certificate whatever trustServerCertificate says: trust the simulator's
    const conn = await connect({ encrypt: "strict", cryptoCredentialsDetails: { ca: fs.readFileSync(certificate) } });
    const r = await query(conn, "SELECT 2");
    conn.close();
    return r.rows[0][0];
  });
  await check("types_at_edges", async () => {
    const conn = await connect();
    const r = await query(
      conn,
      "SELECT CAST(-2147483648 AS int), CAST(255 AS tinyint), CAST(-32768 AS smallint)," +
        " CAST(12345678901234.5678 AS decimal(18,4)), CAST(-214748.3648 AS smallmoney)," +
        " CAST('9999-12-31' AS date), CAST(N'\u00e9\uD83D\uDE00' AS nvarchar(10)), CAST(0x00FF AS varbinary(10))," +
        " CAST(1 AS bit), CAST('6F9619FF-8B86-D011-B42D-00C04FD430C8' AS uniqueidentifier), CAST(NULL AS int)"
    );
    conn.close();
    const v = r.rows[0];
    return [v[0], v[1], v[2], v[3], v[4], v[5].toISOString().slice(0, 10), v[6], v[7].toString("hex"), v[8], v[9], v[10]].join("|");
  });
  await check("serverproperty_sql_variant", async () => {
    const conn = await connect();
    const types = [];
    const request = new Promise((resolve, reject) => {
      const rows = [];
      const r = new Request("SELECT SERVERPROPERTY('ProductVersion'), SERVERPROPERTY('EngineEdition')", (err) =>
        err ? reject(err) : resolve(rows));
      r.on("columnMetadata", (cols) => cols.forEach((c) => types.push(c.type.name)));
      r.on("row", (cols) => rows.push(cols.map((c) => c.value)));
      conn.execSql(r);
    });
    const rows = await request;
    conn.close();
    return `${types.join(",")}|${rows[0][0]}|${typeof rows[0][1]}:${rows[0][1]}`;
  });
  await check("error_then_usable", async () => {
    const conn = await connect();
    let first = "no error";
    try {
      await query(conn, "SELECT * FROM dbo.no_such_table");
    } catch (e) {
      first = `${e.number}/${e.class}/${e.message}`;
    }
    let second = "no error";
    let infos = [];
    const onInfo = (info) => infos.push(info.number);
    conn.on("infoMessage", onInfo);
    try {
      await query(conn, "INSERT INTO dbo.items VALUES (1, N'dup')");
    } catch (e) {
      second = String(e.number);
    }
    conn.removeListener("infoMessage", onInfo);
    const after = await query(conn, "SELECT 40 + 2");
    conn.close();
    return `${first}|${second}|${infos.join(",")}|${after.rows[0][0]}`;
  });
  await check("named_transaction", async () => {
    const conn = await connect();
    await call(conn, "beginTransaction", "tx\u00e9name", ISOLATION_LEVEL.READ_COMMITTED);
    await query(conn, "INSERT INTO dbo.items VALUES (300, N'named')");
    const inside = (await query(conn, "SELECT @@TRANCOUNT")).rows[0][0];
    await call(conn, "rollbackTransaction", "tx\u00e9name");
    const gone = (await query(conn, "SELECT COUNT(*) FROM dbo.items WHERE id = 300")).rows[0][0];
    await call(conn, "beginTransaction", "second");
    await query(conn, "INSERT INTO dbo.items VALUES (301, N'kept')");
    await call(conn, "commitTransaction");
    const kept = (await query(conn, "SELECT COUNT(*) FROM dbo.items WHERE id = 301")).rows[0][0];
    conn.close();
    return `${inside}|${gone}|${kept}`;
  });
  await check("snapshot_isolation", async () => {
    const reader = await connect();
    const writer = await connect();
    await call(reader, "beginTransaction", "", ISOLATION_LEVEL.SNAPSHOT);
    const before = (await query(reader, "SELECT COUNT(*) FROM dbo.items")).rows[0][0];
    await query(writer, "INSERT INTO dbo.items VALUES (400, N'later')");
    const during = (await query(reader, "SELECT COUNT(*) FROM dbo.items")).rows[0][0];
    await call(reader, "commitTransaction");
    const after = (await query(reader, "SELECT COUNT(*) FROM dbo.items")).rows[0][0];
    reader.close();
    writer.close();
    return `${before}|${during}|${after}`;
  });
  await check("cdc_binary10_parameters", async () => {
    const conn = await connect();
    const bounds = (await query(conn, "SELECT sys.fn_cdc_get_min_lsn('dbo_items'), sys.fn_cdc_get_max_lsn()")).rows[0];
    const r = await query(
      conn,
      "SELECT __$operation, id FROM cdc.fn_cdc_get_all_changes_dbo_items(@from, @to, N'all') WHERE id <= 3 ORDER BY __$seqval",
      [
        ["from", TYPES.Binary, bounds[0]],
        ["to", TYPES.Binary, bounds[1]],
      ]
    );
    conn.close();
    return [bounds[0].length + "/" + bounds[1].length, ...r.rows.map((row) => row.join(":"))].join("|");
  });
  await check("metadata_procedures", async () => {
    const conn = await connect();
    const tables = await query(conn, "EXEC sp_tables @table_name = 'items', @table_owner = 'dbo'");
    const keys = await query(conn, "EXEC sp_pkeys @table_name = 'items'");
    const columns = await query(conn, "EXEC sp_columns_100 @table_name = 'items'");
    const tv = await query(conn, "DECLARE @t TABLE (n int); INSERT INTO @t VALUES (1), (2); SELECT SUM(n) FROM @t");
    conn.close();
    return [tables.rows.map((r) => r[2] + ":" + r[3]).join(","), keys.rows.map((r) => r[3]).join(","),
      columns.rows.map((r) => r[3] + ":" + r[5]).join(","), tv.rows[0][0]].join("|");
  });
  await check("large_result", async () => {
    const conn = await connect();
    let count = 0;
    let sum = 0;
    await new Promise((resolve, reject) => {
      const request = new Request(
        "SELECT a.i * 1000 + b.i FROM dbo.numbers AS a CROSS JOIN dbo.numbers AS b WHERE a.i < 400",
        (err) => (err ? reject(err) : resolve())
      );
      request.on("row", (columns) => { count++; sum += columns[0].value; });
      conn.execSql(request);
    });
    conn.close();
    return `${count}|${sum}`;
  });
}

main().then(() => process.exit(0));
