package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Storage roots, compared as the runner compares them (src/core/tenant.ts): `file:/x` is
 * `file:///x`, scheme and authority lower case, no `.`/`..` segments, no escapes. Anything unusual
 * is outside every root.
 */
final class Roots {
  private static final Pattern URI = Pattern.compile("^([A-Za-z][A-Za-z0-9+.-]*):(?://([^/]*))?(/.*)?$");

  private Roots() {}

  /** The normalised form of every root that normalises (a root that does not is dropped: it contains nothing). */
  static List<String> of(List<String> roots) {
    List<String> out = new ArrayList<>();
    for (String r : roots) {
      String n = normalise(r);
      if (n != null) out.add(n.endsWith("/") ? n : n + "/");
    }
    return List.copyOf(out);
  }

  /** Is `location` strictly below one of the (normalised, see `of`) roots? */
  static boolean inside(String location, List<String> normalisedRoots) {
    String l = normalise(location);
    if (l == null) return false;
    for (String r : normalisedRoots) if (l.startsWith(r) || (l + "/").equals(r)) return true;
    return false;
  }

  static String normalise(String uri) {
    if (uri == null) return null;
    var m = URI.matcher(uri);
    if (!m.matches()) return null;
    String scheme = m.group(1).toLowerCase(Locale.ROOT);
    String authority = Objects.requireNonNullElse(m.group(2), "").toLowerCase(Locale.ROOT);
    String path = Objects.requireNonNullElse(m.group(3), "");
    if (m.group(2) == null && !scheme.equals("file")) return null;
    // s3:// and s3a:// name the same bucket (src/core/tenant.ts).
    if (scheme.equals("s3")) scheme = "s3a";
    for (String seg : path.split("/", -1))
      if (seg.equals(".") || seg.equals("..") || seg.contains("\\") || seg.contains("%")) return null;
    if (path.contains("//")) return null;
    while (path.length() > 1 && path.endsWith("/")) path = path.substring(0, path.length() - 1);
    return scheme + "://" + authority + path;
  }
}
