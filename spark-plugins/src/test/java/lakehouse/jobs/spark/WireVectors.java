package lakehouse.jobs.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.sparkproject.connect.protobuf.ByteString;
import org.sparkproject.connect.protobuf.util.JsonFormat;

/**
 * The Java side of the plugin messages' wire format, pinned: every vector of wire-vectors.json
 * (bytes as the runner's generated TypeScript code encodes them, test/unit/spark/plugin-wire.test.ts)
 * decodes with PluginMessages to exactly the vector's fields. Run by spark-plugins/build after it
 * compiles the plugins; a mismatch fails the build.
 */
public final class WireVectors {
  private static final JsonNodeFactory F = JsonNodeFactory.instance;

  public static void main(String[] args) throws Exception {
    JsonNode vectors = new ObjectMapper().readTree(new File(args[0]));
    List<String> failures = new ArrayList<>();
    for (JsonNode v : vectors) {
      String message = v.get("message").asText();
      ByteString bytes = ByteString.copyFrom(HexFormat.of().parseHex(v.get("hex").asText()));
      JsonNode decoded = decode(message, bytes);
      if (!decoded.equals(v.get("json"))) failures.add(message + ": decoded " + decoded + ", the vector says " + v.get("json"));
    }
    for (String f : failures) System.err.println("wire-vectors: " + f);
    if (!failures.isEmpty()) System.exit(1);
    System.err.println("wire-vectors: " + vectors.size() + " vectors decode as written");
  }

  private static JsonNode decode(String message, ByteString bytes) throws Exception {
    ObjectNode o = F.objectNode();
    switch (message) {
      case "lakehouse.jobs.BindTenant" -> {
        TenantBinding.Builder b = PluginMessages.bindTenantFields(bytes);
        if (!b.tenant.isEmpty()) o.put("tenant", b.tenant);
        strings(o, "readNamespaces", b.readNamespaces);
        strings(o, "writeNamespaces", b.writeNamespaces);
        strings(o, "readRoots", b.readRoots);
        strings(o, "writeRoots", b.writeRoots);
        if (!b.kafka.isEmpty()) {
          ArrayNode kafka = o.putArray("kafka");
          for (TenantBinding.KafkaGrant g : b.kafka) {
            ObjectNode k = kafka.addObject();
            strings(k, "bootstrapServers", g.bootstrapServers());
            strings(k, "topics", g.topics());
            strings(k, "topicPrefixes", g.topicPrefixes());
          }
        }
        if (b.limitsSent.length > 0) {
          ObjectNode l = o.putObject("limits");
          String[] names = {"", "valueChars", "valueFactor", "collectionElements", "generatedRows", "rowGrowth", "rowFloor", "stepSeconds", "planNodes"};
          // protobuf's JSON writes an int64 as a string, and leaves zeros out.
          for (int i = 1; i < names.length; i++) if (b.limitsSent[i] != 0) l.put(names[i], Long.toString(b.limitsSent[i]));
        }
      }
      case "lakehouse.jobs.TenantLogic" -> {
        PluginMessages.TenantLogicRequest r = PluginMessages.tenantLogic(bytes);
        o.set("relation", new ObjectMapper().readTree(JsonFormat.printer().print(r.relation())));
        strings(o, "configPaths", r.configPaths());
        if (r.jdbcSources() != 0) o.put("jdbcSources", r.jdbcSources());
      }
      case "lakehouse.jobs.ZeroCopyAppendCheck", "lakehouse.jobs.ZeroCopyAppendCommit" -> {
        ZeroCopyRequest r = PluginMessages.zeroCopy(PluginMessages.PREFIX + message.substring("lakehouse.jobs.".length()), bytes);
        o.put("source", r.source);
        o.put("target", r.target);
        strings(o, "allowedRoots", r.allowedRoots);
        if (!r.runId.isEmpty()) o.put("runId", r.runId);
      }
      default -> throw new IllegalArgumentException("no decoder for " + message);
    }
    return o;
  }

  private static void strings(ObjectNode o, String name, List<String> values) {
    if (values.isEmpty()) return;
    ArrayNode a = o.putArray(name);
    values.forEach(a::add);
  }
}
