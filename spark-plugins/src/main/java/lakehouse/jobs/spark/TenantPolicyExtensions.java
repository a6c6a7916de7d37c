package lakehouse.jobs.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * The session extension (`spark.sql.extensions`, next to Delta's and Iceberg's): the tenant
 * boundary as a check rule, run on every analysed plan of every session; it judges the plans of
 * sessions bound to a tenant (TenantBoundary).
 */
public final class TenantPolicyExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectCheckRule(new AbstractFunction1<org.apache.spark.sql.SparkSession, Function1<LogicalPlan, BoxedUnit>>() {
      @Override
      public Function1<LogicalPlan, BoxedUnit> apply(org.apache.spark.sql.SparkSession session) {
        return new TenantBoundary(session);
      }
    });
    return BoxedUnit.UNIT;
  }
}
