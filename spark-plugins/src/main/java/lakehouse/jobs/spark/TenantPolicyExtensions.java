package lakehouse.jobs.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import scala.Function1;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * The session extension (`spark.sql.extensions`, next to Delta's and Iceberg's): the tenant
 * boundary as a check rule, run on every analysed plan of every session; it judges the plans of
 * sessions bound to a tenant (TenantBoundary), and a parser that judges CALLs (TenantParser).
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
    // CALLs are judged as they are parsed: Spark runs a procedure during analysis (TenantParser).
    extensions.injectParser(
        new AbstractFunction2<org.apache.spark.sql.SparkSession, ParserInterface, ParserInterface>() {
          @Override
          public ParserInterface apply(org.apache.spark.sql.SparkSession session, ParserInterface delegate) {
            return new TenantParser(session, delegate);
          }
        });
    return BoxedUnit.UNIT;
  }
}
