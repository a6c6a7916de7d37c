// The local stack's Kafka client for tests and demos, run by `scripts/kafka tool` as a single-file
// Java program on the broker's own jars (kafka-clients, jackson): no other client to install.
//
//   KafkaTool <bootstrap> create-topic <name> [partitions]
//   KafkaTool <bootstrap> produce <topic>    stdin: JSON lines {"key", "value", "partition", "headers": {name: value}}
//                                            (key/value strings or null; "valueBase64" for a binary value); stdout: one JSON line per record,
//                                            {"topic", "partition", "offset"}, in input order, each as soon as it and
//                                            the records before it are acknowledged
//   KafkaTool <bootstrap> end-offsets <topic>   stdout: {"<partition>": <end offset>, ...} (nothing yet: {})
//   KafkaTool <bootstrap> wait-records <seconds> <topic>=<count>...
//                                            wait until each topic holds at least its count of records (its
//                                            partitions' end offsets summed), asking every 200 ms in this one process;
//                                            stdout: {"<topic>": <records>, ...}; exit 1 if the time runs out first
//   KafkaTool <bootstrap> delete-records <topic> <partition> <before-offset>
//                                            the partition's records before the offset are gone (as retention
//                                            would remove them): a consumer behind it has lost data
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaTool {
  public static void main(String[] args) throws Exception {
    if (args.length < 3) usage();
    String bootstrap = args[0];
    switch (args[1]) {
      case "create-topic" -> createTopic(bootstrap, args[2], args.length > 3 ? Integer.parseInt(args[3]) : 1);
      case "produce" -> produce(bootstrap, args[2]);
      case "end-offsets" -> endOffsets(bootstrap, args[2]);
      case "wait-records" -> {
        if (args.length < 4) usage();
        waitRecords(bootstrap, Long.parseLong(args[2]), java.util.Arrays.copyOfRange(args, 3, args.length));
      }
      case "delete-records" -> {
        if (args.length < 5) usage();
        deleteRecords(bootstrap, args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]));
      }
      default -> usage();
    }
  }

  static void usage() {
    System.err.println(
        "usage: KafkaTool <bootstrap> create-topic <name> [partitions] | produce <topic> | end-offsets <topic> | wait-records <seconds> <topic>=<count>... | delete-records <topic> <partition> <before-offset>");
    System.exit(2);
  }

  static void createTopic(String bootstrap, String name, int partitions) throws Exception {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin admin = Admin.create(p)) {
      admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
    } catch (java.util.concurrent.ExecutionException e) {
      if (!(e.getCause() instanceof TopicExistsException)) throw e;
    }
  }

  static void endOffsets(String bootstrap, String topic) throws Exception {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    Map<String, Long> out = new java.util.TreeMap<>();
    try (Admin admin = Admin.create(p)) {
      if (admin.listTopics().names().get().contains(topic)) {
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> ask = new java.util.HashMap<>();
        for (var part : admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions())
          ask.put(new TopicPartition(topic, part.partition()), org.apache.kafka.clients.admin.OffsetSpec.latest());
        admin.listOffsets(ask).all().get().forEach((tp, r) -> out.put(String.valueOf(tp.partition()), r.offset()));
      }
    }
    System.out.println(new ObjectMapper().writeValueAsString(out));
  }

  static void waitRecords(String bootstrap, long seconds, String[] wanted) throws Exception {
    Map<String, Long> want = new java.util.TreeMap<>();
    for (String w : wanted) {
      int eq = w.lastIndexOf('=');
      if (eq <= 0) usage();
      want.put(w.substring(0, eq), Long.parseLong(w.substring(eq + 1)));
    }
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    long deadline = System.nanoTime() + seconds * 1_000_000_000L;
    Map<String, Long> have = new java.util.TreeMap<>();
    try (Admin admin = Admin.create(p)) {
      for (;;) {
        var names = admin.listTopics().names().get();
        Map<TopicPartition, org.apache.kafka.clients.admin.OffsetSpec> ask = new java.util.HashMap<>();
        List<String> present = want.keySet().stream().filter(names::contains).toList();
        for (String t : want.keySet()) have.put(t, 0L);
        if (!present.isEmpty())
          admin.describeTopics(present).allTopicNames().get().forEach((t, d) -> d.partitions()
              .forEach(part -> ask.put(new TopicPartition(t, part.partition()), org.apache.kafka.clients.admin.OffsetSpec.latest())));
        if (!ask.isEmpty()) admin.listOffsets(ask).all().get().forEach((tp, r) -> have.merge(tp.topic(), r.offset(), Long::sum));
        if (want.entrySet().stream().allMatch(e -> have.get(e.getKey()) >= e.getValue())) break;
        if (System.nanoTime() > deadline) {
          System.out.println(new ObjectMapper().writeValueAsString(have));
          System.err.println("wait-records: not all topics hold their records after " + seconds + " s: " + have + ", wanted " + want);
          System.exit(1);
        }
        Thread.sleep(200);
      }
    }
    System.out.println(new ObjectMapper().writeValueAsString(have));
  }

  static void deleteRecords(String bootstrap, String topic, int partition, long beforeOffset) throws Exception {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin admin = Admin.create(p)) {
      admin.deleteRecords(Map.of(new TopicPartition(topic, partition), RecordsToDelete.beforeOffset(beforeOffset))).all().get();
    }
  }

  static byte[] bytes(JsonNode n) {
    return n == null || n.isNull() ? null : (n.isTextual() ? n.asText() : n.toString()).getBytes(StandardCharsets.UTF_8);
  }

  static void produce(String bootstrap, String topic) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    ObjectMapper json = new ObjectMapper();
    // Acknowledged records are printed as soon as they and every record before them are: a caller
    // that keeps writing lines (a producer that runs beside a test) learns the offsets as it goes.
    java.util.ArrayDeque<Future<RecordMetadata>> sent = new java.util.ArrayDeque<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) continue;
        JsonNode r = json.readTree(line);
        Integer partition = r.hasNonNull("partition") ? r.get("partition").asInt() : null;
        // "valueBase64": a binary value (Avro in the Confluent wire format), as its base64.
        byte[] value = r.hasNonNull("valueBase64") ? java.util.Base64.getDecoder().decode(r.get("valueBase64").asText()) : bytes(r.get("value"));
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, partition, bytes(r.get("key")), value);
        if (r.has("headers")) {
          for (Map.Entry<String, JsonNode> h : r.get("headers").properties()) record.headers().add(h.getKey(), bytes(h.getValue()));
        }
        sent.add(producer.send(record));
        while (!sent.isEmpty() && sent.peek().isDone()) printAck(json, sent.poll());
        System.out.flush();
      }
      producer.flush();
      while (!sent.isEmpty()) printAck(json, sent.poll());
    }
  }

  static void printAck(ObjectMapper json, Future<RecordMetadata> f) throws Exception {
    RecordMetadata m = f.get();
    System.out.println(json.writeValueAsString(Map.of("topic", m.topic(), "partition", m.partition(), "offset", m.offset())));
  }
}
