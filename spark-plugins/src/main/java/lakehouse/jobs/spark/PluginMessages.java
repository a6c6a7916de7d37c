package lakehouse.jobs.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.connect.proto.Relation;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.ByteString;
import org.sparkproject.connect.protobuf.CodedInputStream;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;
import org.sparkproject.connect.protobuf.WireFormat;

/**
 * The plugin messages of src/spark/proto/lakehouse/jobs/plugins.proto, decoded with the server's
 * own (shaded) protobuf runtime field by field: no generated Java code, whose version would have to
 * match the runtime Spark shades. spark-plugins/wire-vectors.json pins both sides' encoding.
 */
final class PluginMessages {
  static final String PREFIX = "type.googleapis.com/lakehouse.jobs.";
  static final String BIND_TENANT = PREFIX + "BindTenant";
  static final String TENANT_LOGIC = PREFIX + "TenantLogic";
  static final String ZERO_COPY_CHECK = PREFIX + "ZeroCopyAppendCheck";
  static final String ZERO_COPY_COMMIT = PREFIX + "ZeroCopyAppendCommit";

  private PluginMessages() {}

  /** The Any a plugin receives, or null when the bytes are not one. */
  static Any any(byte[] bytes) {
    try {
      return Any.parseFrom(bytes);
    } catch (InvalidProtocolBufferException e) {
      return null;
    }
  }

  /** Visit each field of a message: `field` gets the field number and the stream positioned at its value. */
  interface FieldReader {
    /** Reads the field's value and returns true, or returns false to have it skipped. */
    boolean read(int field, int wireType, CodedInputStream in) throws IOException;
  }

  static void fields(ByteString bytes, FieldReader reader) {
    try {
      CodedInputStream in = bytes.newCodedInput();
      for (int tag = in.readTag(); tag != 0; tag = in.readTag()) {
        if (!reader.read(WireFormat.getTagFieldNumber(tag), WireFormat.getTagWireType(tag), in)) in.skipField(tag);
      }
    } catch (IOException e) {
      throw new IllegalArgumentException("malformed plugin message: " + e.getMessage(), e);
    }
  }

  static final int LENGTH_DELIMITED = WireFormat.WIRETYPE_LENGTH_DELIMITED;
  static final int VARINT = WireFormat.WIRETYPE_VARINT;

  /** lakehouse.jobs.BindTenant */
  static TenantBinding bindTenant(ByteString value) {
    return bindTenantFields(value).build();
  }

  /** lakehouse.jobs.BindTenant's fields as sent. */
  static TenantBinding.Builder bindTenantFields(ByteString value) {
    TenantBinding.Builder b = new TenantBinding.Builder(value.toByteArray());
    fields(value, (field, type, in) -> {
      if (type != LENGTH_DELIMITED) return false;
      switch (field) {
        case 1 -> b.tenant = in.readStringRequireUtf8();
        case 2 -> b.readNamespaces.add(in.readStringRequireUtf8());
        case 3 -> b.writeNamespaces.add(in.readStringRequireUtf8());
        case 4 -> b.readRoots.add(in.readStringRequireUtf8());
        case 5 -> b.writeRoots.add(in.readStringRequireUtf8());
        case 6 -> b.kafka.add(kafkaGrant(in.readBytes()));
        case 7 -> {
          b.limitsSent = limitValues(in.readBytes());
          b.limits = limits(b.limitsSent);
        }
        default -> {
          return false;
        }
      }
      return true;
    });
    return b;
  }

  private static TenantBinding.KafkaGrant kafkaGrant(ByteString value) {
    List<String> servers = new ArrayList<>();
    List<String> topics = new ArrayList<>();
    List<String> prefixes = new ArrayList<>();
    fields(value, (field, type, in) -> {
      if (type != LENGTH_DELIMITED || field < 1 || field > 3) return false;
      (field == 1 ? servers : field == 2 ? topics : prefixes).add(in.readStringRequireUtf8());
      return true;
    });
    return new TenantBinding.KafkaGrant(servers, topics, prefixes);
  }

  /** lakehouse.jobs.Limits, by field number (index 0 unused). */
  private static long[] limitValues(ByteString value) {
    long[] v = new long[9];
    fields(value, (field, type, in) -> {
      if (type != VARINT || field < 1 || field > 8) return false;
      v[field] = in.readInt64();
      return true;
    });
    return v;
  }

  private static TenantBinding.Limits limits(long[] v) {
    return TenantBinding.Limits.of(v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
  }

  /** lakehouse.jobs.TenantLogic */
  record TenantLogicRequest(Relation relation, List<String> configPaths, int jdbcSources) {}

  static TenantLogicRequest tenantLogic(ByteString value) {
    Relation[] relation = {null};
    List<String> paths = new ArrayList<>();
    int[] jdbc = {0};
    fields(value, (field, type, in) -> {
      if (field == 1 && type == LENGTH_DELIMITED) relation[0] = Relation.parseFrom(in.readBytes());
      else if (field == 2 && type == LENGTH_DELIMITED) paths.add(in.readStringRequireUtf8());
      else if (field == 3 && type == VARINT) jdbc[0] = in.readInt32();
      else return false;
      return true;
    });
    if (relation[0] == null) throw new IllegalArgumentException("lakehouse.jobs.TenantLogic without a relation");
    return new TenantLogicRequest(relation[0], List.copyOf(paths), jdbc[0]);
  }

  /** lakehouse.jobs.ZeroCopyAppendCheck and ZeroCopyAppendCommit (the same fields). */
  static ZeroCopyRequest zeroCopy(String typeUrl, ByteString value) {
    ZeroCopyRequest r = new ZeroCopyRequest(typeUrl);
    fields(value, (field, type, in) -> {
      if (type != LENGTH_DELIMITED) return false;
      switch (field) {
        case 1 -> r.source = in.readStringRequireUtf8();
        case 2 -> r.target = in.readStringRequireUtf8();
        case 3 -> r.allowedRoots.add(in.readStringRequireUtf8());
        case 4 -> r.runId = in.readStringRequireUtf8();
        default -> {
          return false;
        }
      }
      return true;
    });
    if (r.source.isEmpty() || r.target.isEmpty() || r.allowedRoots.isEmpty())
      throw new IllegalArgumentException("zero-copy append request without source, target or allowed roots");
    return r;
  }
}
