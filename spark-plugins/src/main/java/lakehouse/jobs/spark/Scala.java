package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/** The few conversions from Scala's collections and options the plugins need. */
final class Scala {
  private Scala() {}

  static <T> List<T> list(scala.collection.Iterable<T> seq) {
    return new ArrayList<>(CollectionConverters.asJavaCollection(seq));
  }

  static <K, V> Map<K, V> map(scala.collection.Map<K, V> m) {
    return CollectionConverters.asJava(m);
  }

  static <T> T orNull(Option<T> o) {
    return o.isDefined() ? o.get() : null;
  }

  /** The names of a case class's product elements, in order. */
  static List<String> names(scala.Product p) {
    List<String> out = new ArrayList<>();
    CollectionConverters.asJava(p.productElementNames()).forEachRemaining(out::add);
    return out;
  }

  /** The product elements of a case class (a plan node's constructor arguments). */
  static List<Object> elements(scala.Product p) {
    List<Object> out = new ArrayList<>();
    CollectionConverters.asJava(p.productIterator()).forEachRemaining(out::add);
    return out;
  }
}
