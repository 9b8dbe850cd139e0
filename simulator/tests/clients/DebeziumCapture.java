// Debezium's SQL Server connector (3.6.3, embedded engine) against the simulator, run by test_debezium.py.
// Usage: java -cp 'debezium/*' DebeziumCapture.java HOST PORT PASSWORD DATABASE TABLES EXPECTED_RECORDS TIMEOUT_S
// Prints each change event value as one line "EVENT <json>", then "DONE <count>" once EXPECTED_RECORDS
// data events (snapshot reads and changes) arrived, "TIMEOUT <count>" after TIMEOUT_S, or "FAILED ...".
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

public class DebeziumCapture {
    public static void main(String[] args) throws Exception {
        String host = args[0], port = args[1], password = args[2], database = args[3], tables = args[4];
        int expected = Integer.parseInt(args[5]);
        int timeout = Integer.parseInt(args[6]);

        Properties p = new Properties();
        p.setProperty("name", "simulator-capture");
        p.setProperty("connector.class", "io.debezium.connector.sqlserver.SqlServerConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.MemoryOffsetBackingStore");
        p.setProperty("offset.flush.interval.ms", "1000");
        p.setProperty("schema.history.internal", "io.debezium.relational.history.MemorySchemaHistory");
        p.setProperty("database.hostname", host);
        p.setProperty("database.port", port);
        p.setProperty("database.user", "sa");
        p.setProperty("database.password", password);
        p.setProperty("database.names", database);
        p.setProperty("database.encrypt", "true");
        p.setProperty("database.trustServerCertificate", "true");
        p.setProperty("topic.prefix", "sim");
        p.setProperty("table.include.list", tables);
        p.setProperty("snapshot.mode", "initial");
        p.setProperty("poll.interval.ms", "200");
        p.setProperty("errors.max.retries", "0");
        p.setProperty("decimal.handling.mode", "string");
        p.setProperty("binary.handling.mode", "hex");
        p.setProperty("key.converter.schemas.enable", "false");
        p.setProperty("value.converter.schemas.enable", "false");

        AtomicInteger count = new AtomicInteger();
        CountDownLatch enough = new CountDownLatch(1);
        CountDownLatch failed = new CountDownLatch(1);
        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
            .using(p)
            .using((success, message, error) -> {
                if (!success) {
                    System.out.println("FAILED " + message + (error == null ? "" : " " + error).replace('\n', ' '));
                    failed.countDown();
                }
            })
            .notifying(record -> {
                if (record.value() == null) return; // tombstones
                System.out.println("EVENT " + record.value());
                System.out.flush();
                boolean data = record.value().contains("\"op\":"); // not a schema change event
                if (data && count.incrementAndGet() >= expected) enough.countDown();
            })
            .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        long deadline = System.currentTimeMillis() + timeout * 1000L;
        while (System.currentTimeMillis() < deadline && enough.getCount() > 0 && failed.getCount() > 0) {
            enough.await(200, TimeUnit.MILLISECONDS);
        }
        System.out.println((enough.getCount() == 0 ? "DONE " : "TIMEOUT ") + count.get());
        System.out.flush();
        engine.close();
        executor.shutdownNow();
        System.exit(0);
    }
}
