"""Writes ``broker_core/kafka_config_keys.py``: Kafka's broker and topic config keys at a
tag, as tables, so that DescribeConfigs and config validation read data, not code per key.

Run by hand when the Kafka version followed changes:

    python tools/gen_kafka_config_keys.py /work/.mirror/apache+kafka/repo 2.7.0 > broker_core/kafka_config_keys.py

It reads, through ``git show``:
- core/src/main/scala/kafka/server/KafkaConfig.scala: every ``.define(name, TYPE,
  default, [validator,] IMPORTANCE, doc)`` of the broker's ConfigDef, with ``object
  Defaults`` for the defaults;
- core/src/main/scala/kafka/log/LogConfig.scala: the topic ConfigDef's defines (with
  their validators) and ``TopicConfigSynonyms`` (topic key -> broker key);
- core/src/main/scala/kafka/server/DynamicBrokerConfig.scala and the sets it joins into
  ``AllDynamicConfigs`` (LogCleaner.scala, SocketServer.scala, SslConfigs.java): which
  broker keys may change at run time, and which of them only per broker;
- core/src/main/scala/kafka/server/DynamicConfig.scala: ``DynamicConfig.Broker``'s
  ConfigDef (the replication throttle rates), keys that exist only as dynamic configs
  of a broker (KafkaConfig does not define them; ``addDynamicConfigs`` makes them
  dynamic), written to a table of their own with their validators;
- Java constants (``SslConfigs.SSL_PROTOCOL_CONFIG``, ...) from clients/src/main/java.

A default is written as DescribeConfigs shows it (ConfigDef.convertToString): lists
joined by commas, booleans lower case, None for no default. The few Scala expressions
the small evaluator below cannot read are in ``_BY_HAND``, each with where it comes from.
"""
from __future__ import annotations

import re
import subprocess
import sys

_KAFKA_CONFIG = "core/src/main/scala/kafka/server/KafkaConfig.scala"
_LOG_CONFIG = "core/src/main/scala/kafka/log/LogConfig.scala"
_DYNAMIC = "core/src/main/scala/kafka/server/DynamicBrokerConfig.scala"
_DYNAMIC_CONFIG = "core/src/main/scala/kafka/server/DynamicConfig.scala"
_CLEANER = "core/src/main/scala/kafka/log/LogCleaner.scala"
_SOCKET_SERVER = "core/src/main/scala/kafka/network/SocketServer.scala"
_JAVA_ROOT = "clients/src/main/java"

# Defaults the evaluator cannot compute from the sources it reads (other Scala objects,
# method calls), written from the 2.7.0 sources named.
_BY_HAND = {
    "Records.LOG_OVERHEAD": "12",  # clients/.../record/Records.java: OFFSET_OFFSET 8 + SIZE_LENGTH 4
    "ApiVersion.latestVersion.toString": "2.7-IV2",  # core/.../api/ApiVersion.scala: KAFKA_2_7_IV2
    "InterBrokerProtocolVersion": "2.7-IV2",
    "SecurityProtocol.PLAINTEXT.toString": "PLAINTEXT",
    "Sensor.RecordingLevel.INFO.toString()": "INFO",
    "SslClientAuth.NONE.name().toLowerCase(Locale.ROOT)": "none",
    "ZooKeeperClientCnxnSocket": None,
    "OffsetConfig.DefaultMaxMetadataSize": "4096",  # core/.../coordinator/group/OffsetConfig.scala
    "OffsetConfig.DefaultLoadBufferSize": "5242880",
    "OffsetConfig.DefaultOffsetsTopicReplicationFactor": "3",
    "OffsetConfig.DefaultOffsetsTopicNumPartitions": "50",
    "OffsetConfig.DefaultOffsetsTopicSegmentBytes": "104857600",
    "OffsetConfig.DefaultOffsetsTopicCompressionCodec.codec": "0",
    "OffsetConfig.DefaultOffsetsRetentionMs": "604800000",
    "OffsetConfig.DefaultOffsetsRetentionCheckIntervalMs": "600000",
    "OffsetConfig.DefaultOffsetCommitTimeoutMs": "5000",
    "OffsetConfig.DefaultOffsetCommitRequiredAcks": "-1",
    "TransactionStateManager.DefaultTransactionalIdExpirationMs": "604800000",  # .../transaction/*.scala
    "TransactionStateManager.DefaultTransactionsMaxTimeoutMs": "900000",
    "TransactionStateManager.DefaultAbortTimedOutTransactionsIntervalMs": "10000",
    "TransactionStateManager.DefaultRemoveExpiredTransactionalIdsIntervalMs": "3600000",
    "TransactionLog.DefaultMinInSyncReplicas": "2",
    "TransactionLog.DefaultLoadBufferSize": "5242880",
    "TransactionLog.DefaultReplicationFactor": "3",
    "TransactionLog.DefaultNumPartitions": "50",
    "TransactionLog.DefaultSegmentBytes": "104857600",
    "ClientQuotaManagerConfig.QuotaDefault": "9223372036854775807",  # ...server/ClientQuotaManager.scala
    "ClientQuotaManagerConfig.DefaultNumQuotaSamples": "11",
    "ClientQuotaManagerConfig.DefaultQuotaWindowSizeSeconds": "1",
    "ReplicationQuotaManagerConfig.DefaultNumQuotaSamples": "11",
    "ReplicationQuotaManagerConfig.DefaultQuotaWindowSizeSeconds": "1",
    "ReplicationQuotaManagerConfig.QuotaBytesPerSecondDefault": "9223372036854775807",  # Long.MaxValue
    "ProducerCompressionCodec.name": "producer",  # core/.../message/CompressionCodec.scala
    "Collections.emptyList[String]()": "",
    "Collections.emptyList()": "",
    'new String("")': "",
    "LegacyRecord.RECORD_OVERHEAD_V0": "14",  # clients/.../record/LegacyRecord.java
    # SslConfigs.java's static block, on Java 11 or later (TLSv1.2 alone on older Javas)
    "SslConfigs.DEFAULT_SSL_PROTOCOL": "TLSv1.3",
    "SslConfigs.DEFAULT_SSL_ENABLED_PROTOCOLS": "TLSv1.2,TLSv1.3",
    "KeyManagerFactory.getDefaultAlgorithm()": "SunX509",  # the JDK's ssl.KeyManagerFactory.algorithm
    "TrustManagerFactory.getDefaultAlgorithm()": "PKIX",  # the JDK's ssl.TrustManagerFactory.algorithm
    "BrokerSecurityConfigs.DEFAULT_SASL_ENABLED_MECHANISMS": "GSSAPI",  # singletonList(GSSAPI_MECHANISM)
    "BrokerSecurityConfigs.DEFAULT_SASL_KERBEROS_PRINCIPAL_TO_LOCAL_RULES": "DEFAULT",
    # core/.../cluster/EndPoint.scala DefaultSecurityProtocolMap, in SecurityProtocol.values order
    "EndPoint.DefaultSecurityProtocolMap.map { case (listenerName, securityProtocol) =>":
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    "Defaults.LeaderReplicationThrottledReplicas": "",
    "Defaults.FollowerReplicationThrottledReplicas": "",
}
_CHOICE_LISTS = {  # in(...) arguments that name a Scala collection
    "Defaults.SslClientAuthenticationValidValues:_*": ("required", "requested", "none"),  # SslClientAuth.VALUES
    "BrokerCompressionCodec.brokerCompressionOptions:_*": ("uncompressed", "zstd", "lz4", "snappy", "gzip",
                                                           "producer"),
}


def _show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def _java_constants(repo: str, tag: str) -> dict[str, str]:
    """``Class.NAME`` -> its literal, for every ``static final`` String/number/boolean in
    the clients' config classes (the ones KafkaConfig refers to)."""
    listed = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", tag, _JAVA_ROOT], check=True,
                            capture_output=True, text=True).stdout.split()
    wanted = [p for p in listed if re.search(r"/(\w*Configs?|SaslConfigs|CommonClientConfigs|TopicConfig)\.java$", p)]
    out: dict[str, str] = {}
    pattern = re.compile(r"static final (?:String|int|long|short|double|boolean|Integer|Long) (\w+)\s*=\s*([^;]+);")
    for path in wanted:
        cls = path.rsplit("/", 1)[1][:-5]
        for name, expr in pattern.findall(_show(repo, tag, path)):
            expr = expr.strip()
            out[f"{cls}.{name}"] = f"{cls}.{expr}" if re.fullmatch(r"[A-Z_]+", expr) else expr
    return out


def _split_args(text: str) -> list[str]:
    args, depth, current, quoted = [], 0, [], False
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        if not quoted:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == "," and depth == 0:
                args.append("".join(current).strip())
                current = []
                continue
        current.append(ch)
    if "".join(current).strip():
        args.append("".join(current).strip())
    return args


def _split_plus(text: str) -> list[str]:
    """``a + "b" + c`` at the top level, outside string literals."""
    parts, depth, current, quoted = [], 0, [], False
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        if not quoted:
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if ch == "+" and depth == 0:
                parts.append("".join(current).strip())
                current = []
                continue
        current.append(ch)
    parts.append("".join(current).strip())
    return parts


def _calls(text: str, marker: str) -> list[str]:
    """The argument text of every ``marker(...)`` in ``text``."""
    found, start = [], 0
    while True:
        at = text.find(marker, start)
        if at < 0:
            return found
        i, depth = at + len(marker), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        found.append(text[at + len(marker):i - 1])
        start = i


class _Resolver:
    def __init__(self, scopes: dict[str, dict[str, str]], bare: tuple[str, ...], java: dict[str, str]):
        self.scopes = scopes  # "server.Defaults", "KafkaConfig", "log.Defaults", "LogConfig" -> their vals
        self.bare = bare  # where a name without a prefix is looked up, in order
        self.java = java

    def in_scope(self, bare: tuple[str, ...]) -> "_Resolver":
        return _Resolver(self.scopes, bare, self.java)

    def _lookup(self, expr: str) -> tuple[str, tuple[str, ...]] | None:
        prefixed = (("kafka.server.Defaults.", ("server.Defaults",)), ("KafkaConfig.", ("KafkaConfig",)),
                    ("LogConfig.", ("LogConfig",)),
                    ("Defaults.", ("log.Defaults",) if "LogConfig" in self.bare[:1] else ("server.Defaults",)))
        for prefix, scopes in prefixed:
            if expr.startswith(prefix):
                name, names = expr[len(prefix):], scopes
                break
        else:
            name, names = expr, self.bare
        for scope in names:
            if name in self.scopes[scope]:
                home = {"server.Defaults": ("server.Defaults", "KafkaConfig"), "KafkaConfig": ("KafkaConfig", "server.Defaults"),
                        "log.Defaults": ("log.Defaults", "LogConfig"),
                        "LogConfig": ("LogConfig", "log.Defaults")}.get(scope, (scope,))
                return self.scopes[scope][name], home
        return None

    def value(self, expr: str, depth: int = 0):
        """A Scala/Java expression as a Python value (str, int, float, bool, list, None)."""
        expr = expr.strip()
        if depth > 20:
            raise ValueError(expr)
        if expr in _BY_HAND:
            known = _BY_HAND[expr]
            return int(known) if known is not None and re.fullmatch(r"-?\d+", known) else known
        if expr == "null":
            return None
        if expr in ("true", "false"):
            return expr == "true"
        if re.fullmatch(r'"(?:[^"\\]|\\.)*"', expr):
            return expr[1:-1]
        found = self._lookup(expr)
        if found is not None:
            return self.in_scope(found[1]).value(found[0], depth + 1)
        if expr in self.java:
            return self.value(self.java[expr], depth + 1)
        parts = _split_plus(expr)
        if len(parts) > 1 and any(p.startswith('"') for p in parts):
            return "".join(str(self.value(p, depth + 1)) for p in parts)
        if expr.startswith("List(") or expr.startswith("Utils.join(") or expr.startswith("Collections.singletonList("):
            inner = expr[expr.index("(") + 1:-1]
            return [self.value(a, depth + 1) for a in _split_args(inner) if not a.startswith('", "') and a != '","']
        if expr.startswith("Arrays.asList(") or expr.startswith("Collections.unmodifiableList(Arrays.asList("):
            inner = expr[expr.index("asList(") + 7:].rstrip(")")
            return [self.value(a, depth + 1) for a in _split_args(inner)]
        return self._arithmetic(expr, depth)

    def _arithmetic(self, expr: str, depth: int):
        names = {"Long.MaxValue": str(2**63 - 1), "Int.MaxValue": str(2**31 - 1), "Double.MaxValue": "1.7976931348623157E308"}
        text = expr
        for name, literal in names.items():
            text = text.replace(name, literal)

        def substitute(match: re.Match) -> str:
            resolved = self.value(match.group(0), depth + 1)
            if not isinstance(resolved, (int, float)) or isinstance(resolved, bool):
                raise ValueError(expr)
            return repr(resolved)
        text = re.sub(r"(?<=\d)[LdD]\b", "", text)
        text = re.sub(r"(?<![\w.])[A-Za-z_][\w.]*(?:\(\))?", substitute, text)
        if not re.fullmatch(r"[\d\s+*/().eE-]+", text):
            raise ValueError(expr)
        result = eval(text, {"__builtins__": {}})  # digits and operators only (checked above)
        return int(result) if isinstance(result, int) or float(result).is_integer() and "." not in text else result


def _scala_vals(source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if True:
        for name, expr in re.findall(r"^\s*(?:(?:lazy|private(?:\[\w+\])?)\s+)*(?:val|var) (\w+)(?:\s*:\s*[\w\[\]]+)?\s*=\s*(.+?)\s*$",
                                     source, re.M):
            out.setdefault(name, expr)
    return out


def _text(value, kind: str) -> str | None:
    """ConfigDef.convertToString of a default."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if kind == "DOUBLE":
        return repr(float(value)).replace("e+", "E")
    return str(value)


def _defines(source: str, resolver: _Resolver) -> list[tuple[str, str, str | None, tuple, str | None]]:
    """(name, type, default text, validator, server default property) per define."""
    rows, unresolved = [], []
    for call in _calls(source, ".define("):
        try:
            rows.append(_define(_split_args(call), resolver))
        except (ValueError, IndexError) as failure:
            unresolved.append(f"{call[:60]}...: {failure}")
    if unresolved:
        raise SystemExit("add these to _BY_HAND:\n" + "\n".join(unresolved))
    return rows


def _define(args: list[str], resolver: _Resolver) -> tuple[str, str, str | None, tuple, str | None]:
    if True:
        name = resolver.value(args[0])
        kind = args[1]
        if args[2] in ("HIGH", "MEDIUM", "LOW"):
            default, validator_expr, rest = None, None, args[4:]
        elif len(args) > 3 and args[3] in ("HIGH", "MEDIUM", "LOW"):
            default, validator_expr, rest = resolver.value(args[2]), None, args[5:]
        else:
            default, validator_expr, rest = resolver.value(args[2]), args[3], args[6:]
        server_key = resolver.value(rest[0]) if rest else None
        return (name, kind, _text(default, kind), _validator(validator_expr, resolver), server_key)


def _validator(expr: str | None, resolver: _Resolver) -> tuple:
    """A validator as data: ("at_least", n), ("between", lo, hi), ("in", choices),
    ("list_in", choices), or () for none the table checks (ApiVersionValidator and
    ThrottledReplicaListValidator are left to the owner of those keys)."""
    if expr is None:
        return ()
    for prefix, kind in (("atLeast(", "at_least"), ("between(", "between"), ("ValidList.in(", "list_in"),
                         ("ValidString.in(", "in"), ("in(", "in")):
        if expr.startswith(prefix):
            inner = expr[len(prefix):-1]
            if inner in _CHOICE_LISTS:
                return (kind, _CHOICE_LISTS[inner])
            values = tuple(resolver.value(a) for a in _split_args(inner))
            if kind in ("in", "list_in"):
                flat = []
                for v in values:
                    flat.extend(v if isinstance(v, list) else [v])
                return (kind, tuple(str(v) for v in flat))
            return (kind, *values)
    return ()


def _set_members(source: str, marker: str, resolver: _Resolver) -> list[str]:
    block = _calls(source, marker)[0]
    return [resolver.value(a) for a in _split_args(re.sub(r"//[^\n]*", "", block))]


def main(repo: str, tag: str) -> None:
    kafka_config = _show(repo, tag, _KAFKA_CONFIG)
    log_config = _show(repo, tag, _LOG_CONFIG)
    dynamic = _show(repo, tag, _DYNAMIC)
    java = _java_constants(repo, tag)
    server_split = kafka_config.index("object KafkaConfig")
    log_split = log_config.index("case class LogConfig")
    scopes = {"server.Defaults": _scala_vals(kafka_config[:server_split]),
              "KafkaConfig": _scala_vals(kafka_config[server_split:]),
              "log.Defaults": _scala_vals(log_config[:log_split]), "LogConfig": _scala_vals(log_config[log_split:])}
    resolver = _Resolver(scopes, ("KafkaConfig", "server.Defaults"), java)
    log_resolver = resolver.in_scope(("LogConfig", "log.Defaults"))
    broker_rows = _defines(kafka_config[kafka_config.index("configDef"):], resolver)
    topic_rows = _defines(log_config[log_config.index("val configDef"):], log_resolver)
    synonyms = {log_resolver.value(k): resolver.value(v) for k, v in
                re.findall(r"(\w+Prop) -> (KafkaConfig\.\w+Prop)", log_config[log_config.index("TopicConfigSynonyms"):])}
    security = [resolver.value(a) for a in _split_args(_calls(_show(repo, tag, "clients/src/main/java/org/apache/kafka/"
                                                                 "common/config/SslConfigs.java"),
                                                           "RECONFIGURABLE_CONFIGS = Utils.mkSet(")[0])]
    cleaner = _set_members(_show(repo, tag, _CLEANER), "val ReconfigurableConfigs = Set(", resolver)
    socket = _set_members(_show(repo, tag, _SOCKET_SERVER), "val ReconfigurableConfigs = Set(", resolver)
    threads = _set_members(dynamic[dynamic.index("object DynamicThreadPool"):], "ReconfigurableConfigs = Set(", resolver)
    listener = _set_members(dynamic[dynamic.index("object DynamicListenerConfig"):], "ReconfigurableConfigs = Set(",
                            resolver)
    log_dynamic = sorted(set(synonyms.values()) - {"log.message.format.version"})  # DynamicLogConfig.ExcludedConfigs
    metric_reporters = resolver.value("KafkaConfig.MetricReporterClassesProp")
    every_dynamic = set(security) | set(cleaner) | set(log_dynamic) | set(threads) | {metric_reporters} | \
        set(listener) | set(socket)
    per_broker = (set(security) | set(listener)) - {"max.connections", "max.connection.creation.rate"}
    dynamic_only = _dynamic_broker_rows(_show(repo, tag, _DYNAMIC_CONFIG), resolver)
    _write(tag, broker_rows, topic_rows, synonyms, every_dynamic, per_broker, dynamic_only)


def _dynamic_broker_rows(source: str, resolver: _Resolver) -> list:
    """DynamicConfig.Broker's defines, its own vals in scope."""
    broker = source[source.index("object Broker"):source.index("object QuotaConfigs")]
    resolver.scopes["DynamicConfig.Broker"] = _scala_vals(broker)
    return _defines(broker[broker.index("val brokerConfigDef"):], resolver.in_scope(("DynamicConfig.Broker",)))


def _write(tag, broker_rows, topic_rows, synonyms, every_dynamic, per_broker, dynamic_only) -> None:
    out = [f'"""Kafka {tag}\'s config keys, as tables; written by tools/gen_kafka_config_keys.py from',
           "core/src/main/scala/kafka/server/KafkaConfig.scala (broker keys, ConfigDef types and defaults),",
           "core/src/main/scala/kafka/log/LogConfig.scala (topic keys, validators, TopicConfigSynonyms) and",
           "core/src/main/scala/kafka/server/DynamicBrokerConfig.scala (AllDynamicConfigs, PerBrokerConfigs) and",
           "core/src/main/scala/kafka/server/DynamicConfig.scala (DynamicConfig.Broker).",
           'Do not edit by hand: broker_core/config_keys.py reads these tables."""',
           "",
           "# name: (ConfigDef type, default as DescribeConfigs writes it or None, dynamic update mode:",
           '# "read-only", "per-broker" (only /config/brokers/<id>) or "cluster-wide" (also <default>))',
           "BROKER_KEYS: dict[str, tuple[str, str | None, str]] = {"]
    for name, kind, default, _, _ in sorted(broker_rows, key=lambda row: str(row[0])):
        mode = "read-only" if name not in every_dynamic else "per-broker" if name in per_broker else "cluster-wide"
        out.append(f"    {name!r}: ({kind!r}, {default!r}, {mode!r}),")
    out += ["}", "",
            "# name: (ConfigDef type, LogConfig default or None, validator, the broker key it falls back to)",
            "# validator: () none checked here, (\"at_least\", n), (\"between\", lo, hi), (\"in\", choices),",
            "# (\"list_in\", choices)",
            "TOPIC_KEYS_KAFKA: dict[str, tuple[str, str | None, tuple, str | None]] = {"]
    for name, kind, default, validator, _ in sorted(topic_rows):
        out.append(f"    {name!r}: ({kind!r}, {default!r}, {validator!r}, {synonyms.get(name)!r}),")
    out += ["}", "",
            "# Keys that exist only as a broker's dynamic configs (DynamicConfig.Broker), not in",
            "# KafkaConfig: settable cluster-wide and per broker, not listed by DescribeConfigs.",
            "# name: (ConfigDef type, default, validator as above)",
            "DYNAMIC_BROKER_KEYS: dict[str, tuple[str, str | None, tuple]] = {"]
    for name, kind, default, validator, _ in sorted(dynamic_only):
        out.append(f"    {name!r}: ({kind!r}, {default!r}, {validator!r}),")
    out.append("}")
    print("\n".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:3])
