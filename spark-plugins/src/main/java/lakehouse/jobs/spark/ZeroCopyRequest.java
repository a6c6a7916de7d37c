package lakehouse.jobs.spark;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The request the runner sends in a Spark Connect extension (a google.protobuf.Any): its type URL
 * names the action, its value is this message (spark-plugins/zero_copy.proto). Decoded by hand
 * from the protobuf wire format so that the plugin needs no protobuf runtime (Spark's is shaded).
 */
final class ZeroCopyRequest {
  static final String CHECK_TYPE = "type.googleapis.com/lakehouse.jobs.ZeroCopyAppendCheck";
  static final String COMMIT_TYPE = "type.googleapis.com/lakehouse.jobs.ZeroCopyAppendCommit";

  final String typeUrl;
  String source = "";
  String target = "";
  /** Normalised storage roots every file the target adopts must lie under. */
  final List<String> allowedRoots = new ArrayList<>();
  String runId = "";

  private ZeroCopyRequest(String typeUrl) {
    this.typeUrl = typeUrl;
  }

  /** The request in `any` (a serialised Any), or null when the extension is not ours. */
  static ZeroCopyRequest parse(byte[] any) {
    Wire w = new Wire(any);
    String type = null;
    byte[] value = new byte[0];
    while (w.more()) {
      long tag = w.varint();
      int field = (int) (tag >>> 3);
      int wireType = (int) (tag & 7);
      if (field == 1 && wireType == 2) type = new String(w.bytes(), StandardCharsets.UTF_8);
      else if (field == 2 && wireType == 2) value = w.bytes();
      else w.skip(wireType);
    }
    if (!CHECK_TYPE.equals(type) && !COMMIT_TYPE.equals(type)) return null;
    ZeroCopyRequest r = new ZeroCopyRequest(type);
    Wire v = new Wire(value);
    while (v.more()) {
      long tag = v.varint();
      int field = (int) (tag >>> 3);
      int wireType = (int) (tag & 7);
      if (wireType != 2) {
        v.skip(wireType);
        continue;
      }
      String s = new String(v.bytes(), StandardCharsets.UTF_8);
      switch (field) {
        case 1 -> r.source = s;
        case 2 -> r.target = s;
        case 3 -> r.allowedRoots.add(s);
        case 4 -> r.runId = s;
        default -> { }
      }
    }
    if (r.source.isEmpty() || r.target.isEmpty() || r.allowedRoots.isEmpty())
      throw new IllegalArgumentException("zero-copy append request without source, target or allowed roots");
    return r;
  }

  boolean isCommit() {
    return COMMIT_TYPE.equals(typeUrl);
  }

  /** A minimal protobuf wire reader: varints and length-delimited fields. */
  private static final class Wire {
    private final byte[] b;
    private int pos;

    Wire(byte[] b) {
      this.b = b;
    }

    boolean more() {
      return pos < b.length;
    }

    long varint() {
      long result = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= b.length) throw new IllegalArgumentException("truncated varint");
        byte x = b[pos++];
        result |= (long) (x & 0x7f) << shift;
        if ((x & 0x80) == 0) return result;
      }
      throw new IllegalArgumentException("malformed varint");
    }

    byte[] bytes() {
      long n = varint();
      if (n < 0 || n > b.length - pos) throw new IllegalArgumentException("truncated field");
      byte[] out = java.util.Arrays.copyOfRange(b, pos, pos + (int) n);
      pos += (int) n;
      return out;
    }

    void skip(int wireType) {
      switch (wireType) {
        case 0 -> varint();
        case 1 -> pos += 8;
        case 2 -> bytes();
        case 5 -> pos += 4;
        default -> throw new IllegalArgumentException("unsupported wire type " + wireType);
      }
    }
  }
}
