package lakehouse.jobs.spark;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkThrowable;

/**
 * A refusal of the tenant policy (LAKEHOUSE_TENANT_POLICY) or an analysis error of tenant logic
 * (LAKEHOUSE_TENANT_ANALYSIS), as Spark Connect sends any SparkThrowable to the client: its error
 * class and message parameters in the error's metadata, which the runner turns into a config error
 * (78) at the parameters' config paths. The message names only what the tenant wrote or the class
 * of a plan node or expression: never data, plan text or what a view or glob expanded to.
 */
final class TenantPolicyException extends RuntimeException implements SparkThrowable {
  static final String REFUSED = "LAKEHOUSE_TENANT_POLICY";
  static final String ANALYSIS = "LAKEHOUSE_TENANT_ANALYSIS";
  private static final long serialVersionUID = 1L;

  private final String condition;
  private final Map<String, String> parameters;

  private TenantPolicyException(String condition, String message, Map<String, String> parameters) {
    super("[" + condition + "] " + message);
    this.condition = condition;
    this.parameters = Map.copyOf(parameters);
  }

  /** A refusal: `reason` says what is refused and why, in the tenant's words. */
  static TenantPolicyException refused(String reason, List<String> configPaths) {
    Map<String, String> p = new LinkedHashMap<>();
    p.put("reason", reason);
    p.put("configPaths", String.join("\n", configPaths));
    return new TenantPolicyException(REFUSED, "refused by the tenant policy: " + reason, p);
  }

  /** An analysis error of tenant logic, with only the parameters that may be shown (TenantLogicPlugin decides). */
  static TenantPolicyException analysis(String summary, Map<String, String> parameters) {
    return new TenantPolicyException(ANALYSIS, summary, parameters);
  }

  @Override
  public String getCondition() {
    return condition;
  }

  @Override
  public String getSqlState() {
    return "42000";
  }

  @Override
  public Map<String, String> getMessageParameters() {
    return parameters;
  }
}
