"""The Data Vault hash keys of docs/templates/dv-hub.md ("Hash keys"), computed without Spark: the
reference the tests compare Spark's keys with.
Usage: dv_keys.py '<json: [[algorithm, [value, ...]], ...]>'   one key per line"""
import hashlib
import json
import sys

NULL_TOKEN = "^^"
DELIMITER = "||"


def part(value):
    # Spark's trim removes spaces (U+0020) only; upper is the Unicode default case mapping.
    text = None if value is None else str(value).strip(" ").upper()
    return NULL_TOKEN if text is None or text == "" else text


def key(algorithm, values):
    data = DELIMITER.join(part(v) for v in values).encode("utf-8")
    digest = {"md5": hashlib.md5, "sha1": hashlib.sha1, "sha256": hashlib.sha256}[algorithm](data)
    return digest.hexdigest().upper()


for algorithm, values in json.loads(sys.argv[1]):
    print(key(algorithm, values))
