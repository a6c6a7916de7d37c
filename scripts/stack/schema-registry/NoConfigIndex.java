package lakehouse.stack;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/**
 * The registry's config-index extension has no deployment artifact on Maven Central, so its build
 * step never runs; its one product is the list of properties editable at run time, which the
 * local stack does not use: an empty list stands in for it.
 */
@ApplicationScoped
public class NoConfigIndex {
  @Produces
  @ApplicationScoped
  DynamicConfigPropertyList dynamicConfigProperties() {
    return new DynamicConfigPropertyList(List.of());
  }
}
