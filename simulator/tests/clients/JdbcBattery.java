// The client battery for Microsoft's JDBC driver (mssql-jdbc), run by test_mssql_jdbc.py.
// Usage: java -cp mssql-jdbc.jar JdbcBattery.java HOST PORT PASSWORD CERT_PEM
// Prints one line per check: "CHECK <name> OK <detail>" or "CHECK <name> FAIL <what went wrong>".
import java.sql.*;
import java.util.*;

public class JdbcBattery {
    static String host, password, certificate;
    static int port;

    interface Check { String run() throws Exception; }

    static void check(String name, Check body) {
        try {
            String detail = body.run();
            System.out.println("CHECK " + name + " OK " + (detail == null ? "" : detail.replace('\n', ' ')));
        } catch (Throwable e) {
            String msg = e.toString();
            if (e instanceof SQLException) msg = "SQLException " + ((SQLException) e).getErrorCode() + " " + msg;
            System.out.println("CHECK " + name + " FAIL " + msg.replace('\n', ' '));
        }
    }

    static Connection connect(String database, String options) throws SQLException {
        String url = "jdbc:sqlserver://" + host + ":" + port + ";databaseName=" + database
            + ";user=sa;password={" + password + "};loginTimeout=10;" + options;
        return DriverManager.getConnection(url);
    }

    // the driver's defaults (encrypt=true) plus trusting the self-signed certificate
    static Connection connect(String database) throws SQLException {
        return connect(database, "trustServerCertificate=true;");
    }

    static String one(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getString(1);
        }
    }

    static void require(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    public static void main(String[] args) throws Exception {
        host = args[0];
        port = Integer.parseInt(args[1]);
        password = args[2];
        certificate = args[3];

        check("login_tls_default", () -> {
            try (Connection c = connect("clientdb")) {
                return one(c, "SELECT DB_NAME()") + " " + c.getMetaData().getDatabaseProductVersion();
            }
        });
        check("login_login_only_tls", () -> {
            try (Connection c = connect("clientdb", "encrypt=false;")) { return one(c, "SELECT 1"); }
        });
        check("login_strict_tds8", () -> {
            try (Connection c = connect("clientdb", "encrypt=strict;serverCertificate=" + certificate + ";")) {
                return one(c, "SELECT 2");
            }
        });
        check("types_at_edges", () -> {
            try (Connection c = connect("clientdb"); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery(
                     "SELECT CAST(-2147483648 AS int), CAST(-9223372036854775808 AS bigint), CAST(255 AS tinyint),"
                     + " CAST(99999999999999999999999999999999999999 AS decimal(38,0)),"
                     + " CAST(-0.00000000000000000000000000000000000001 AS decimal(38,38)),"
                     + " CAST(922337203685477.5807 AS money), CAST(-214748.3648 AS smallmoney),"
                     + " CAST('9999-12-31 23:59:59.9999999' AS datetime2(7)), CAST('0001-01-01' AS date),"
                     + " CAST('23:59:59.9999999' AS time(7)), CAST('2024-02-29 12:34:56.997' AS datetime),"
                     + " CAST('9999-12-31 23:59:59.9999999 +14:00' AS datetimeoffset(7)),"
                     + " CAST('6F9619FF-8B86-D011-B42D-00C04FD430C8' AS uniqueidentifier),"
                     + " CAST(0x00FF AS varbinary(max)), N'\u00e9\uD83D\uDE00', CAST(1 AS bit), CAST(1.5E308 AS float),"
                     + " CAST(3.4E38 AS real), REPLICATE(CAST(N'x' AS nvarchar(max)), 100000)")) {
                rs.next();
                List<String> out = new ArrayList<>();
                for (int i = 1; i <= 18; i++) out.add(rs.getString(i));
                out.add(Integer.toString(rs.getString(19).length()));
                return String.join("|", out);
            }
        });
        check("serverproperty_sql_variant", () -> {
            try (Connection c = connect("clientdb"); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT SERVERPROPERTY('ProductVersion'), SERVERPROPERTY('EngineEdition'),"
                     + " SERVERPROPERTY('InstanceName')")) {
                rs.next();
                ResultSetMetaData md = rs.getMetaData();
                return md.getColumnTypeName(1) + "|" + rs.getObject(1) + "|" + rs.getObject(2).getClass().getSimpleName()
                    + ":" + rs.getObject(2) + "|" + rs.getObject(3);
            }
        });
        check("error_then_usable", () -> {
            try (Connection c = connect("clientdb"); Statement s = c.createStatement()) {
                String first;
                try {
                    s.executeQuery("SELECT * FROM dbo.no_such_table");
                    return "no error";
                } catch (SQLException e) {
                    first = e.getErrorCode() + "/" + e.getSQLState() + "/" + e.getMessage();
                }
                String second;
                try {
                    s.executeUpdate("INSERT INTO dbo.items VALUES (1, N'dup')");
                    return "no duplicate key error";
                } catch (SQLException e) {
                    second = Integer.toString(e.getErrorCode());
                }
                return first + "|" + second + "|" + one(c, "SELECT 40 + 2");
            }
        });
        check("transactions", () -> {
            try (Connection c = connect("clientdb"); Statement s = c.createStatement()) {
                c.setAutoCommit(false);
                s.executeUpdate("INSERT INTO dbo.items VALUES (100, N'rolled back')");
                String inside = one(c, "SELECT @@TRANCOUNT");
                c.rollback();
                String afterRollback = one(c, "SELECT COUNT(*) FROM dbo.items WHERE id = 100");
                s.executeUpdate("INSERT INTO dbo.items VALUES (101, N'committed')");
                c.commit();
                c.setAutoCommit(true);
                return inside + "|" + afterRollback + "|" + one(c, "SELECT COUNT(*) FROM dbo.items WHERE id = 101");
            }
        });
        check("snapshot_isolation", () -> {
            try (Connection reader = connect("clientdb"); Connection writer = connect("clientdb")) {
                reader.setAutoCommit(false);
                reader.setTransactionIsolation(4096); // SQLServerConnection.TRANSACTION_SNAPSHOT
                String before = one(reader, "SELECT COUNT(*) FROM dbo.items");
                try (Statement w = writer.createStatement()) { w.executeUpdate("INSERT INTO dbo.items VALUES (200, N'later')"); }
                String during = one(reader, "SELECT COUNT(*) FROM dbo.items");
                reader.commit();
                String after = one(reader, "SELECT COUNT(*) FROM dbo.items");
                return before + "|" + during + "|" + after;
            }
        });
        check("cdc_binary10_parameters", () -> {
            try (Connection c = connect("clientdb")) {
                byte[] from, to;
                try (Statement s = c.createStatement();
                     ResultSet rs = s.executeQuery("SELECT sys.fn_cdc_get_min_lsn('dbo_items'), sys.fn_cdc_get_max_lsn()")) {
                    rs.next();
                    from = rs.getBytes(1);
                    to = rs.getBytes(2);
                }
                try (PreparedStatement p = c.prepareStatement(
                        "SELECT __$operation, id, name FROM cdc.fn_cdc_get_all_changes_dbo_items(?, ?, N'all') WHERE id <= 3 ORDER BY __$seqval")) {
                    p.setBytes(1, from);
                    p.setBytes(2, to);
                    StringBuilder sb = new StringBuilder(from.length + "/" + to.length);
                    try (ResultSet rs = p.executeQuery()) {
                        while (rs.next()) sb.append("|").append(rs.getInt(1)).append(":").append(rs.getInt(2));
                    }
                    return sb.toString();
                }
            }
        });
        check("metadata_tables", () -> {
            try (Connection c = connect("clientdb"); ResultSet rs = c.getMetaData().getTables("clientdb", "dbo", "items", null)) {
                StringBuilder sb = new StringBuilder();
                while (rs.next()) sb.append(rs.getString("TABLE_NAME")).append(":").append(rs.getString("TABLE_TYPE"));
                return sb.toString();
            }
        });
        check("metadata_primary_keys", () -> {
            try (Connection c = connect("clientdb"); ResultSet rs = c.getMetaData().getPrimaryKeys("clientdb", "dbo", "items")) {
                StringBuilder sb = new StringBuilder();
                while (rs.next()) sb.append(rs.getString("COLUMN_NAME")).append(":").append(rs.getInt("KEY_SEQ"));
                return sb.toString();
            }
        });
        check("metadata_columns", () -> {
            try (Connection c = connect("clientdb"); ResultSet rs = c.getMetaData().getColumns("clientdb", "dbo", "items", null)) {
                StringBuilder sb = new StringBuilder();
                while (rs.next()) sb.append(rs.getString("COLUMN_NAME")).append(":").append(rs.getString("TYPE_NAME")).append(" ");
                return sb.toString().trim();
            }
        });
        check("metadata_column_types", () -> {
            try (Connection c = connect("clientdb"); ResultSet rs = c.getMetaData().getColumns("clientdb", "dbo", "typed", null)) {
                StringBuilder sb = new StringBuilder();
                while (rs.next()) {
                    sb.append(rs.getString("COLUMN_NAME")).append(":").append(rs.getInt("DATA_TYPE")).append(":")
                      .append(rs.getString("TYPE_NAME")).append(":").append(rs.getInt("COLUMN_SIZE")).append(":")
                      .append(rs.getString("DECIMAL_DIGITS")).append(":").append(rs.getString("SQL_DATA_TYPE"))
                      .append(":").append(rs.getString("SQL_DATETIME_SUB")).append(" ");
                }
                return sb.toString().trim();
            }
        });
        check("large_result", () -> {
            try (Connection c = connect("clientdb"); Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery(
                     "SELECT a.i * 1000 + b.i AS n FROM dbo.numbers AS a CROSS JOIN dbo.numbers AS b WHERE a.i < 400")) {
                long count = 0, sum = 0;
                while (rs.next()) { count++; sum += rs.getLong(1); }
                return count + "|" + sum;
            }
        });
    }
}
