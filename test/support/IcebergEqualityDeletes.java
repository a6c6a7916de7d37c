import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.GenericAppenderFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.deletes.EqualityDeleteWriter;
import org.apache.iceberg.encryption.EncryptedFiles;
import org.apache.iceberg.jdbc.JdbcCatalog;

/**
 * Test support: commit an equality delete file (on the column `id`) to an unpartitioned Iceberg
 * table of the local stack, as Flink CDC would; Spark cannot write them. Run as a single-file
 * program on the stack's class path:
 *   java -cp <spark jars>:<iceberg runtime> IcebergEqualityDeletes.java <lake-home> <namespace> <table> <id>
 */
public class IcebergEqualityDeletes {
  public static void main(String[] args) throws Exception {
    String lake = args[0];
    JdbcCatalog catalog = new JdbcCatalog();
    catalog.setConf(new Configuration());
    catalog.initialize("lake", Map.of("uri", "jdbc:sqlite:" + lake + "/iceberg_catalog.db", "warehouse", lake + "/warehouse", "jdbc.schema-version", "V1"));
    Table table = catalog.loadTable(TableIdentifier.of(args[1], args[2]));
    var idField = table.schema().findField("id");
    var deleteSchema = table.schema().select("id");
    var factory = new GenericAppenderFactory(table.schema(), table.spec(), new int[] {idField.fieldId()}, deleteSchema, null);
    String path = table.location() + "/data/eq-delete-" + System.nanoTime() + ".parquet";
    EqualityDeleteWriter<Record> writer =
        factory.newEqDeleteWriter(EncryptedFiles.plainAsEncryptedOutput(table.io().newOutputFile(path)), FileFormat.PARQUET, null);
    Record r = GenericRecord.create(deleteSchema);
    r.setField("id", Long.parseLong(args[3]));
    try (writer) {
      writer.write(r);
    }
    DeleteFile file = writer.toDeleteFile();
    table.newRowDelta().addDeletes(file).commit();
    System.out.println(List.of(file.location()));
    catalog.close();
  }
}
