"""The object store's objects as the tests see them, through pyarrow's own S3 client (not Spark's).
Usage: object_store.py list <s3a-uri>             every object under it, recursively: one JSON line each
                                                   {"path": <relative to the uri>, "size": n}
       object_store.py put <s3a-uri> <local-file>  write one object
       object_store.py mkdir <s3a-uri>             a directory marker: the zero-byte object "<key>/"
       object_store.py delete <s3a-uri>            delete every object under it
The endpoint and key come from the environment: LAKEHOUSE_S3_ENDPOINT, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY (test/support/stack.ts sets them from scripts/object-store)."""
import json
import os
import sys
from urllib.parse import urlparse

from pyarrow import fs

endpoint = urlparse(os.environ["LAKEHOUSE_S3_ENDPOINT"])
s3 = fs.S3FileSystem(
    access_key=os.environ["AWS_ACCESS_KEY_ID"],
    secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    endpoint_override=endpoint.netloc,
    scheme=endpoint.scheme,
    region="us-east-1",
)
command, uri = sys.argv[1], sys.argv[2]
parsed = urlparse(uri)
assert parsed.scheme in ("s3", "s3a"), uri
path = parsed.netloc + parsed.path.rstrip("/")
if command == "list":
    infos = s3.get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
    for info in sorted(infos, key=lambda i: i.path):
        if info.type == fs.FileType.File:
            print(json.dumps({"path": info.path[len(path) :], "size": info.size}))
elif command == "put":
    with open(sys.argv[3], "rb") as src, s3.open_output_stream(path) as out:
        out.write(src.read())
elif command == "mkdir":
    s3.create_dir(path, recursive=True)  # a marker for the key and each missing parent, as S3A mkdirs leaves them
elif command == "delete":
    s3.delete_dir_contents(path, missing_dir_ok=True)
else:
    sys.exit(f"unknown command {command}")
