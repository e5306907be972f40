"""Writes ``schemas.py`` and ``group_schemas.py`` from Kafka's message definitions (the
spec), at a tag.

Run by hand when the supported messages change (the module name defaults to schemas):

    python -m real_io.protocol._generate /work/.mirror/apache+kafka/repo 2.7.0 > real_io/protocol/schemas.py
    python -m real_io.protocol._generate /work/.mirror/apache+kafka/repo 2.7.0 group_schemas \
        > real_io/protocol/group_schemas.py

The consumer-group messages have a module of their own so that neither module grows past
a readable size and adding them left ``schemas.py`` byte for byte as it was.

It reads clients/src/main/resources/common/message/<Name>.json through ``git show`` and
keeps only what the codec needs (names, types, version ranges, nullability, tags and
defaults); the "about" texts stay in Kafka's files.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

MESSAGES = ("ApiVersions", "Metadata", "Produce", "Fetch", "ListOffset", "CreateTopics", "DeleteTopics",
            "InitProducerId", "OffsetForLeaderEpoch", "DescribeConfigs", "FindCoordinator",
            "LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdown", "AlterIsr",
            "AlterConfigs", "IncrementalAlterConfigs", "CreatePartitions", "DescribeClientQuotas", "AlterClientQuotas",
            "AlterPartitionReassignments", "ListPartitionReassignments")
GROUP_MESSAGES = ("JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "OffsetCommit", "OffsetFetch",
                  "DescribeGroups", "ListGroups", "DeleteGroups", "OffsetDelete")
MODULES = {"schemas": MESSAGES, "group_schemas": GROUP_MESSAGES}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _range(text: str | None) -> str:
    if text is None or text == "none":
        return "None"
    if text.endswith("+"):
        return f"({int(text[:-1])}, None)"
    if "-" in text:
        lo, hi = text.split("-")
        return f"({int(lo)}, {int(hi)})"
    return f"({int(text)}, {int(text)})"


def _field(spec: dict, structs: dict, indent: str) -> str:
    kind = spec["type"]
    subfields = spec.get("fields")
    bare = kind[2:] if kind.startswith("[]") else kind
    if subfields is None and bare in structs:
        subfields = structs[bare]["fields"]
    args = [repr(_snake(spec["name"])), repr("[]struct" if kind.startswith("[]") and subfields else
                                              "struct" if subfields else kind),
            _range(spec["versions"])]
    extra = []
    if "nullableVersions" in spec:
        extra.append(f"nullable={_range(spec['nullableVersions'])}")
    if "tag" in spec:
        extra.append(f"tag={spec['tag']}")
    if "flexibleVersions" in spec:
        extra.append(f"flexible={_range(spec.get('flexibleVersions'))}")
    if "default" in spec:
        default = spec["default"]
        text = str(default).lower() if isinstance(default, bool) else str(default)
        extra.append(f"default={text!r}")
    if subfields:
        inner = ",\n".join(_field(f, structs, indent + "    ") for f in subfields)
        extra.append(f"fields=(\n{inner},\n{indent})")
    return f"{indent}F({', '.join(args + extra)})"


def _load(repo: str, tag: str, name: str) -> dict:
    text = subprocess.run(["git", "-C", repo, "show", f"{tag}:clients/src/main/resources/common/message/{name}.json"],
                          check=True, capture_output=True, text=True).stdout
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def main(repo: str, tag: str, module: str = "schemas") -> None:
    what = "consumer-group message schemas" if module == "group_schemas" else "message schemas"
    out = [f'"""Kafka\'s {what} at {tag}, as tables; written by _generate.py from',
           "clients/src/main/resources/common/message/*.json. Do not edit by hand.\"\"\"",
           "from real_io.protocol.schema import F, Message", "", "MESSAGES = {"]
    for base in MODULES[module]:
        for kind in ("Request", "Response"):
            spec = _load(repo, tag, base + kind)
            structs = {s["name"]: s for s in spec.get("commonStructs", ())}
            fields = ",\n".join(_field(f, structs, "        ") for f in spec["fields"])
            out.append(f"    ({spec['apiKey']}, {kind == 'Response'}): Message({spec['apiKey']}, {spec['name']!r}, "
                       f"{_range(spec['validVersions'])}, {_range(spec.get('flexibleVersions'))}, (\n{fields},\n    )),")
    out.append("}")
    print("\n".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
