package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.List;
import org.sparkproject.connect.protobuf.Any;

/**
 * The zero-copy append's request (lakehouse.jobs.ZeroCopyAppendCheck or ZeroCopyAppendCommit):
 * the Any's type URL names the action, its value the tables and roots (PluginMessages decodes it).
 */
final class ZeroCopyRequest {
  final String typeUrl;
  String source = "";
  String target = "";
  /** Storage roots every file the target adopts must lie under. */
  final List<String> allowedRoots = new ArrayList<>();
  String runId = "";

  ZeroCopyRequest(String typeUrl) {
    this.typeUrl = typeUrl;
  }

  /** The request in `bytes` (a serialised Any), or null when the extension is not ours. */
  static ZeroCopyRequest parse(byte[] bytes) {
    Any any = PluginMessages.any(bytes);
    if (any == null) return null;
    String type = any.getTypeUrl();
    if (!PluginMessages.ZERO_COPY_CHECK.equals(type) && !PluginMessages.ZERO_COPY_COMMIT.equals(type)) return null;
    return PluginMessages.zeroCopy(type, any.getValue());
  }

  boolean isCommit() {
    return PluginMessages.ZERO_COPY_COMMIT.equals(typeUrl);
  }
}
