# shellcheck shell=bash
# Sourced by scripts/spark-connect (and compose.yaml's jar service): write_s3a_pom <file> writes the
# Maven project whose runtime dependencies are Spark's S3A connector, from versions.env's
# HADOOP_VERSION and AWS_SDK_VERSION. hadoop-aws comes without its dependencies (its "bundle" is the
# whole AWS SDK, about 600 MB), the SDK modules S3A loads are versioned by the SDK's BOM, and what
# Spark's own jars provide (Hadoop, Netty, httpclient 4, commons-codec, slf4j) is excluded, so one
# version of each is on the class path.
write_s3a_pom() {
  local sdk exclude='' group
  for group in io.netty org.apache.httpcomponents org.apache.httpcomponents.client5 org.apache.httpcomponents.core5 org.slf4j commons-codec; do
    exclude+="<exclusion><groupId>$group</groupId><artifactId>*</artifactId></exclusion>"
  done
  exclude+='<exclusion><groupId>software.amazon.awssdk</groupId><artifactId>apache5-client</artifactId></exclusion>'
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo '<!-- Written by scripts/stack/s3a-pom.sh: the S3A connector of the Spark server. -->'
    echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
    echo '  <groupId>lakehouse-jobs.local</groupId><artifactId>spark-s3a</artifactId><version>0</version>'
    echo "  <dependencyManagement><dependencies><dependency><groupId>software.amazon.awssdk</groupId><artifactId>bom</artifactId><version>$AWS_SDK_VERSION</version><type>pom</type><scope>import</scope></dependency></dependencies></dependencyManagement>"
    echo '  <dependencies>'
    echo "    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId><version>$HADOOP_VERSION</version><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>"
    # s3: the client; the transfer manager and the Netty client: S3A's uploads and copies; the Apache
    # client: its synchronous requests; sts: assumed roles and web identities (Kubernetes).
    for sdk in s3 s3-transfer-manager apache-client netty-nio-client sts; do
      echo "    <dependency><groupId>software.amazon.awssdk</groupId><artifactId>$sdk</artifactId><exclusions>$exclude</exclusions></dependency>"
    done
    echo '  </dependencies>'
    echo '</project>'
  } >"$1"
}
