"""Broker and topic configuration with Kafka's names, defaults and behaviour profiles.

Where the user's two Kafka documents disagree (0.8.2 and 2.7) both behaviours are kept
and a profile selects one: ``kafka-0.8`` truncates to the high watermark and elects
unclean leaders by default; ``kafka-2.7`` truncates by leader epoch and does not.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from broker_core.api_version import LATEST_2_7, UnknownApiVersion, api_version
from broker_core.errors import ConfigError
from broker_core.throttled_replicas import parse_throttled_replicas

NEVER = 2**63 - 1  # Kafka's Long.MAX_VALUE, used for "never flush"

# high_watermark: Kafka before 0.11; leader_epoch: KIP-101 with KIP-279 (2.0 and later);
# leader_epoch_kip101: KIP-101 alone (0.11 to 1.1), one round, the leader's offset only;
# diverging_epoch: no OffsetsForLeaderEpoch, the follower sends the epoch of its last
# record with each fetch and truncates when the leader answers with a diverging epoch
# (KAFKA-10554, followers from 2.8/3.0; the leader's check exists since 2.7).
TRUNCATION_RULES = ("high_watermark", "leader_epoch", "leader_epoch_kip101", "diverging_epoch")
EPOCH_TRUNCATION_RULES = ("leader_epoch", "leader_epoch_kip101", "diverging_epoch")
# What a follower does when its fetch offset is out of range at the leader: reset
# (2.0+ fetchOffsetAndTruncate: truncate to the leader's end if it is below ours, else
# fetch from max(the leader's start, our end)), or halt_if_unclean_off (0.8.2
# handleOffsetOutOfRange: the leader's end below ours halts the broker unless unclean
# election is on for the topic, which truncates to it; else truncate fully and start at
# the leader's start).
FOLLOWER_OUT_OF_RANGE_RULES = ("reset", "halt_if_unclean_off")

# Kafka's LogManager.InitialTaskDelayMs: the log flusher first runs this long after startup
# (0.8.2 and 2.7 alike), then every log.flush.scheduler.interval.ms.
LOG_FLUSHER_INITIAL_DELAY_MS = 30000
# How a leader changes its ISR: it writes the coordination store itself, synchronously
# (up to 2.6, and 2.7 with an older inter.broker.protocol.version), or asks the
# controller with AlterIsr (KIP-497, 2.7+).
ISR_CHANGE_PROTOCOLS = ("zookeeper", "alter_isr")
BOOL_KEYS = frozenset({
    "unclean_leader_election_enable", "auto_leader_rebalance_enable", "auto_create_topics_enable",
    "delete_topic_enable",
    "controller_watches_deletions",
    "controller_watches_reassignments",
    "failover_removes_dead_replicas",
    "unclean_empties_isr",
    "follower_fetch_leader_epoch",
    "offsets_unavailable_below_epoch_start",
    "demotion_completes_produces",
    "same_leader_keeps_follower_state",
    "alter_isr_commit_advances_high_watermark",
    "controller_detects_bounce",
    "stop_replica_leader_epoch",
    "unclean_enable_triggers_election",
})
ISRLAB_KEYS = frozenset({
    "controller_watches_deletions",
    "controller_watches_reassignments",
    "truncation",
    "isr_change_protocol",
    "registration_conflict",
    "failover_removes_dead_replicas",
    "unclean_empties_isr",
    "follower_out_of_range",
    "follower_fetch_leader_epoch",
    "offsets_unavailable_below_epoch_start",
    "demotion_completes_produces",
    "isr_lag_rule",
    "isr_expiration_period",
    "request_time_source",
    "request_model_base_nanos",
    "request_model_nanos_per_byte",
    "same_leader_keeps_follower_state",
    "alter_isr_commit_advances_high_watermark",
    "controller_detects_bounce",
    "stop_replica_leader_epoch",
    "unclean_enable_triggers_election",
})
# When a leader counts an ISR follower as out of sync (besides replica.lag.max.messages):
# last_fetch: it sent no fetch within replica.lag.time.max.ms (0.8.2, a stuck follower);
# last_caught_up: it has not caught up to the leader's log end within that time (KIP-16,
# 0.9 to 2.0); last_caught_up_unless_at_log_end: the same, but never while its log end
# equals the leader's, so an idle partition keeps a follower that stopped fetching
# (KAFKA-7152, 2.1+).
ISR_LAG_RULES = ("last_fetch", "last_caught_up", "last_caught_up_unless_at_log_end")
# How often the leader checks its ISR for out-of-sync followers (ReplicaManager's
# isr-expiration task): every replica.lag.time.max.ms (0.8.2) or every half of it (0.9+).
ISR_EXPIRATION_PERIODS = ("lag_time", "half_lag_time")
# What a starting broker does when its /brokers/ids node is held by another session:
# 0.8.2 backs off and retries until that session expires; 2.7 fails startup and exits.
REGISTRATION_CONFLICT_RULES = ("retry", "exit")


# Values of 0 that would make the broker spin without time passing (a timer due again at
# once, a request timed out as soon as it is sent); Kafka's scheduler refuses a period of
# 0 (ScheduledThreadPoolExecutor), and a zero controller request timeout never lets the
# controller's requests arrive.
_AT_LEAST_ONE = {
    "min_insync_replicas": "must be at least 1",
    "leader_imbalance_check_interval_seconds": "must be at least 1",
    "replica_high_watermark_checkpoint_interval_ms": "must be at least 1 (a period of 0 would checkpoint "
                                                     "forever without time passing; Kafka's scheduler refuses it)",
    "controller_socket_timeout_ms": "must be at least 1 (with 0 every controller request would time out as it "
                                    "is sent, again and again, without time passing)",
    # Quotas (issue 22): KafkaConfig's atLeast(1) for the windows and the static defaults.
    "quota_window_num": "must be at least 1 (KafkaConfig: atLeast(1))",
    "quota_window_size_seconds": "must be at least 1 (KafkaConfig: atLeast(1))",
    "replication_quota_window_num": "must be at least 1 (KafkaConfig: atLeast(1))",
    "replication_quota_window_size_seconds": "must be at least 1 (KafkaConfig: atLeast(1))",
    "quota_producer_default": "must be at least 1 byte per second (KafkaConfig: atLeast(1))",
    "quota_consumer_default": "must be at least 1 byte per second (KafkaConfig: atLeast(1))",
}


@dataclass(frozen=True)
class BrokerConfig:
    replica_lag_time_max_ms: int = 30000
    replica_lag_max_messages: int | None = None  # 0.8 only: lag in messages also evicts
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    # 2.7.0 KafkaConfig.FetchMaxBytes (55 MiB): the most a consumer's fetch response carries,
    # whatever its own MaxBytes asks (KafkaApis.handleFetchRequest takes the smaller).
    fetch_max_bytes: int = 57671680
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    log_flush_interval_messages: int = NEVER
    log_flush_interval_ms: int | None = None  # None: log.flush.scheduler.interval.ms, as in Kafka
    log_flush_scheduler_interval_ms: int = NEVER
    log_flush_offset_checkpoint_interval_ms: int = 60000  # how often recovery points are checkpointed
    log_segment_bytes: int = 1073741824
    log_index_interval_bytes: int = 4096  # bytes between a segment's offset index entries
    # -- segments and retention (issue 22; Kafka 2.7.0 KafkaConfig and LogConfig) ---------
    # Retention by time: log.retention.ms, else .minutes, else .hours (KafkaConfig.
    # logRetentionTimeMillis); a negative value keeps data forever. Retention by size:
    # log.retention.bytes of v2 bytes per partition, -1 none. Segments also roll by age:
    # log.roll.ms, else .hours, less a jitter (log.roll.jitter.ms, else .hours; 0 here
    # unless configured, where Kafka draws it at random up to the configured bound). The
    # deletion checks run every log.retention.check.interval.ms (the kafka-log-retention
    # task). Topics override retention.ms, retention.bytes, segment.ms, segment.jitter.ms
    # (RETENTION_TOPIC_KEYS). Values of -1 mean "none" where Kafka allows it.
    log_retention_hours: int = 168
    log_retention_minutes: int | None = None
    log_retention_ms: int | None = None
    log_retention_bytes: int = -1
    log_roll_hours: int = 168
    log_roll_ms: int | None = None
    log_roll_jitter_hours: int = 0
    log_roll_jitter_ms: int | None = None
    log_retention_check_interval_ms: int = 300000

    @property
    def retention_ms(self) -> int:
        """KafkaConfig.logRetentionTimeMillis: ms, else minutes, else hours; -1 if negative."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * 60_000
        else:
            millis = self.log_retention_hours * 3_600_000
        return -1 if millis < 0 else millis

    @property
    def roll_ms(self) -> int:
        """KafkaConfig.logRollTimeMillis: log.roll.ms, else log.roll.hours."""
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        """KafkaConfig.logRollTimeJitterMillis: log.roll.jitter.ms, else .hours."""
        return self.log_roll_jitter_ms if self.log_roll_jitter_ms is not None else self.log_roll_jitter_hours * 3_600_000
    # -- end of segments and retention ------------------------------------------------
    # Topic creation on first use (KafkaConfig: auto.create.topics.enable, num.partitions,
    # default.replication.factor, with Kafka's defaults).
    auto_create_topics_enable: bool = True
    # delete.topic.enable: 2.7's default is true (KAFKA-5384, 1.0); 0.8.2's was false.
    delete_topic_enable: bool = True
    # isrlab's own: whether an elected controller reads (and watches) /admin/delete_topics.
    # Kafka's always does; the simulation turns it off for a scenario without a
    # delete_topic step, where the read finds nothing but its round trip would shift
    # every later event of a failover (the traces of older scenarios stay the same).
    controller_watches_deletions: bool = True
    # The same for /admin/reassign_partitions (broker_core/reassignment.py): off in the
    # simulation for a scenario without a reassign step.
    controller_watches_reassignments: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    zookeeper_session_timeout_ms: int = 18000
    controller_socket_timeout_ms: int = 30000
    truncation: str = "leader_epoch"
    isr_change_protocol: str = "alter_isr"
    # The controller's automatic preferred leader election (Kafka's names and defaults).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # isrlab's own keys for controller rules that changed between 0.8.2 and 2.7.
    failover_removes_dead_replicas: bool = True  # ReplicaStateMachine.startup: OfflineReplica (2.7, not 0.8.2)
    unclean_empties_isr: bool = False  # 0.8.2 removeReplicaFromIsr keeps the last member only without unclean
    follower_out_of_range: str = "reset"  # FOLLOWER_OUT_OF_RANGE_RULES
    # A follower's fetch carries its current leader epoch (KIP-320, 2.1+); 0.8.2's
    # FetchRequest has no such field, so its fetches are never fenced by one.
    follower_fetch_leader_epoch: bool = True
    # isrlab's own keys for request rules at the leader that changed between 0.8.2 and 2.7.
    # A client's ListOffsets latest answers OFFSET_NOT_AVAILABLE while a new leader's high
    # watermark is below the start of its epoch (2.7 Partition.fetchOffsetForTimestamp; 0.8.2
    # answers the high watermark).
    offsets_unavailable_below_epoch_start: bool = True
    # A leader that becomes follower answers its parked acks=all produces at once (2.7
    # ReplicaManager.makeFollowers); 0.8.2 leaves them to the next follower fetch or the timeout.
    demotion_completes_produces: bool = True
    # isrlab's own keys for the leader's ISR rules that changed between 0.8.2, 2.7 and 3.1.
    isr_lag_rule: str = "last_caught_up_unless_at_log_end"
    isr_expiration_period: str = "half_lag_time"
    same_leader_keeps_follower_state: bool = True  # 2.7 Partition.makeLeader resets only a new leader's
    alter_isr_commit_advances_high_watermark: bool = False  # KAFKA-13091, fixed in 3.1.0
    # KIP-380 (2.2+): a registration by a new session is a bounce, handled as a failure and
    # a start; 0.8.2's BrokerChangeListener compares broker ids only.
    controller_detects_bounce: bool = True
    # KIP-570 (2.6+): StopReplica carries each partition's leader epoch and the broker
    # ignores one that is not newer than its own; 0.8.2's carries none.
    stop_replica_leader_epoch: bool = True
    # 2.7's TopicConfigHandler asks the controller to elect the offline partitions of a
    # topic whose changed config enables unclean election; 0.8.2's controller has no such hook.
    unclean_enable_triggers_election: bool = True

    @property
    def flush_interval_ms(self) -> int:
        """Kafka's KafkaConfig.logFlushIntervalMs: log.flush.interval.ms, or when unset
        log.flush.scheduler.interval.ms."""
        if self.log_flush_interval_ms is None:
            return self.log_flush_scheduler_interval_ms
        return self.log_flush_interval_ms

    @property
    def isr_expiration_interval_ms(self) -> int:
        """How often a leader checks its ISR: ReplicaManager.startup's isr-expiration task,
        every replica.lag.time.max.ms in 0.8.2.2, every half of it in 2.7.0 (at least
        1 ms, so that a lag time of 0 or 1 does not spin)."""
        if self.isr_expiration_period == "lag_time":
            return max(self.replica_lag_time_max_ms, 1)
        return max(self.replica_lag_time_max_ms // 2, 1)
    registration_conflict: str = "exit"
    # --- Quotas (issue 22; broker_core/quotas.py, quota_replication.py, docs/quotas.md) ---
    # Kafka 2.7's keys and defaults (KafkaConfig, DynamicConfig.Broker); their minimums are
    # in _AT_LEAST_ONE and the topic keys in THROTTLED_REPLICAS_KEYS, below.
    # Client quota rates: quota.window.num samples of quota.window.size.seconds each.
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # The same for the replication throttles.
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    # Static client-id quotas in bytes/s, deprecated since 0.11 but read by 2.7:
    # Long.MaxValue is none (the lowest level of the precedence, below /config/clients/<default>).
    quota_producer_default: int = NEVER
    quota_consumer_default: int = NEVER
    # Replication throttles in bytes/s. 2.7 reads them only as dynamic configs of this
    # broker (/config/brokers/<id>); here they are also the value that node holds at start.
    leader_replication_throttled_rate: int = NEVER
    follower_replication_throttled_rate: int = NEVER
    # The topic keys listing throttled replicas ("*" or "<partition>:<broker>,..."); a
    # broker-wide value is no Kafka key: only topics set them (TOPIC_KEYS).
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # isrlab's own: where the request-time quota's handler nanoseconds come from
    # (quota_enforcement.py): "model" charges base + per byte x bytes to each answered
    # produce (acks 1, all) and consumer fetch, a model of the handler time used by the
    # simulation; "measured" takes the times the binding measures (RequestHandled), set
    # by the real binding. Nothing is recorded either way without a request_percentage quota.
    request_time_source: str = "model"
    request_model_base_nanos: int = 200_000  # 0.2 ms of one handler thread per request
    request_model_nanos_per_byte: int = 10
    # --- end of quotas ---

    # -- log compaction (issue 22, the cleaner's slice): Kafka 2.7.0 KafkaConfig's log.cleanup.policy
    # and log.cleaner.* keys with their defaults (LogConfig.scala, Defaults in KafkaConfig.scala).
    # cleanup.policy is a list ("delete", "compact" or both, comma-separated), kept as its
    # normalised text; the ratio is a float in [0, 1] (ConfigDef's DOUBLE with between(0, 1)).
    log_cleanup_policy: str = "delete"
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_delete_retention_ms: int = 86400000  # one day
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = NEVER
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000  # a cleaner thread's sleep when no log needs cleaning
    # isrlab's own: the records (or record-less batches) one step of the cleaner reads before
    # it lets other work run (broker_core/log_cleaner.py); Kafka's thread runs on its own.
    log_cleaner_step_records: int = 1000
    # -- end of log compaction
    # -- consumer groups (issue 24): Kafka 2.7.0's offsets.* and group.* keys with their
    # defaults (KafkaConfig's Defaults), read by the group coordinator (the partition of a
    # group: broker_core/group_records.partition_for) and its __consumer_offsets topic.
    # Their checks are KafkaConfig's: atLeast(1) (_AT_LEAST_ONE below) and
    # validateValues' -1 <= offsets.commit.required.acks <= offsets.topic.replication.factor.
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_retention_minutes: int = 10080  # seven days
    offsets_retention_check_interval_ms: int = 600000
    offsets_commit_required_acks: int = -1
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    # Which record versions a broker writes where older brokers must read them (the
    # values of __consumer_offsets: group_records.py), as ApiVersion names it.
    inter_broker_protocol_version: str = LATEST_2_7
    # -- end of consumer groups

    def validate(self) -> "BrokerConfig":
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _CHOICES:
                if value not in _CHOICES[f.name]:
                    raise ConfigError(kafka_name(f.name), f"must be one of {', '.join(_CHOICES[f.name])}")
            elif f.name in CLEANER_VALUE_KEYS:
                validate_cleaner_value(f.name, value)
            elif f.name in _THROTTLED_REPLICAS_ATTRIBUTES:
                validate_throttled_replicas(kafka_name(f.name), value)
            elif f.name == "inter_broker_protocol_version":
                validate_inter_broker_protocol(value)
            elif f.name in BOOL_KEYS:
                if not isinstance(value, bool):
                    raise ConfigError(kafka_name(f.name), "must be true or false")
            elif value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(kafka_name(f.name), "must be an integer")
            elif value is not None and value < 0 and not (f.name in MINUS_ONE_ALLOWED and value == -1):
                raise ConfigError(kafka_name(f.name), "must not be negative")
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ConfigError(kafka_name(name), _AT_LEAST_ONE[name])
        validate_compaction_lags(self.log_cleaner_min_compaction_lag_ms, self.log_cleaner_max_compaction_lag_ms)
        if self.offsets_commit_required_acks > self.offsets_topic_replication_factor:
            raise ConfigError("offsets.commit.required.acks", "must be greater or equal -1 and less or equal to "
                                                              "offsets.topic.replication.factor")
        return self

    def with_overrides(self, overrides: Mapping[str, Any]) -> "BrokerConfig":
        """Apply Kafka-named overrides (``min.insync.replicas``) or attribute names."""
        changes = {}
        for key in sorted(overrides):
            attr = attribute_name(key)
            if attr not in _FIELD_NAMES:
                raise ConfigError(key, "unknown configuration key")
            changes[attr] = normalize_cleaner_value(attr, overrides[key])
        return replace(self, **changes).validate()


# Segments and retention (issue 22): the topic keys Kafka 2.7.0's LogConfig names, the
# keys where -1 means "none" (LogConfig: retention.ms and retention.bytes, and the broker
# keys behind them), and the check interval, which a period of 0 would make spin.
RETENTION_TOPIC_KEYS = {
    "retention.ms": "log_retention_ms",
    "retention.bytes": "log_retention_bytes",
    "segment.ms": "log_roll_ms",
    "segment.jitter.ms": "log_roll_jitter_ms",
}
MINUS_ONE_MEANS_NONE = frozenset({"log_retention_ms", "log_retention_minutes", "log_retention_hours",
                                  "log_retention_bytes"})
# offsets.commit.required.acks: -1 is "all in-sync replicas", as a producer's acks.
MINUS_ONE_ALLOWED = MINUS_ONE_MEANS_NONE | {"offsets_commit_required_acks"}
_AT_LEAST_ONE.update({name: "must be at least 1 (KafkaConfig: atLeast(1))" for name in (
    "offsets_topic_num_partitions", "offsets_topic_replication_factor", "offsets_topic_segment_bytes",
    "offsets_retention_minutes", "offsets_retention_check_interval_ms", "offsets_commit_timeout_ms",
    "group_max_size")})
_AT_LEAST_ONE["log_cleaner_step_records"] = "must be at least 1 (a cleaner step must make progress)"
_AT_LEAST_ONE["log_retention_check_interval_ms"] = "must be at least 1 (Kafka's scheduler refuses a period of 0)"

# Topic-level keys a topic may override (Kafka's topic configs without the log. prefix).
TOPIC_KEYS = {
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "flush.messages": "log_flush_interval_messages",
    "flush.ms": "log_flush_interval_ms",
    "segment.bytes": "log_segment_bytes",
    "index.interval.bytes": "log_index_interval_bytes",
    # log compaction (the cleaner's slice of issue 22): LogConfig's topic names
    "cleanup.policy": "log_cleanup_policy",
    "min.cleanable.dirty.ratio": "log_cleaner_min_cleanable_ratio",
    "delete.retention.ms": "log_cleaner_delete_retention_ms",
    "min.compaction.lag.ms": "log_cleaner_min_compaction_lag_ms",
    "max.compaction.lag.ms": "log_cleaner_max_compaction_lag_ms",
}
TOPIC_KEYS.update(RETENTION_TOPIC_KEYS)
# Quotas (issue 22): the topic keys that list a topic's throttled replicas, as
# "<partition>:<broker>,..." or "*" (2.7.0 LogConfig; parsed by
# broker_core/quota_replication.parse_throttled_replicas), read by the broker's
# replication throttles (ReplicaManager, the follower's fetcher).
THROTTLED_REPLICAS_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
_THROTTLED_REPLICAS_ATTRIBUTES = frozenset(key.replace(".", "_") for key in THROTTLED_REPLICAS_KEYS)
TOPIC_KEYS.update({key: key.replace(".", "_") for key in THROTTLED_REPLICAS_KEYS})


def validate_inter_broker_protocol(value: Any) -> None:
    """ApiVersion.apply: a version it knows ("2.7-IV2", "2.7", "2.7.0", "0.10.1-IV0")."""
    if not isinstance(value, str):
        raise ConfigError("inter.broker.protocol.version", f"must be a string, not {value!r}")
    try:
        api_version(value)
    except UnknownApiVersion as error:
        raise ConfigError("inter.broker.protocol.version", str(error)) from None


def validate_throttled_replicas(key: str, value: Any) -> None:
    """2.7.0 ThrottledReplicaListValidator: "*" or <partition>:<broker>,..."""
    if not isinstance(value, str):
        raise ConfigError(key, f"must be a string, not {value!r}")
    parse_throttled_replicas(key, value, -1)

PROFILES: dict[str, dict[str, Any]] = {
    "kafka-3.0": {"truncation": "diverging_epoch", "inter_broker_protocol_version": "3.0-IV1"},
    "kafka-2.7": {},
    "kafka-0.8": {
        "replica_lag_time_max_ms": 10000,
        "replica_lag_max_messages": 4000,
        "unclean_leader_election_enable": True,
        "zookeeper_session_timeout_ms": 6000,
        "truncation": "high_watermark",
        "isr_change_protocol": "zookeeper",
        "failover_removes_dead_replicas": False,
        "unclean_empties_isr": True,
        "registration_conflict": "retry",
        "follower_out_of_range": "halt_if_unclean_off",
        "follower_fetch_leader_epoch": False,
        "offsets_unavailable_below_epoch_start": False,
        "demotion_completes_produces": False,
        "isr_lag_rule": "last_fetch",
        "isr_expiration_period": "lag_time",
        "same_leader_keeps_follower_state": False,
        "controller_detects_bounce": False,
        "stop_replica_leader_epoch": False,
        "unclean_enable_triggers_election": False,
        "delete_topic_enable": False,
        "inter_broker_protocol_version": "0.8.2",
    },
}

_CHOICES = {"truncation": TRUNCATION_RULES, "isr_change_protocol": ISR_CHANGE_PROTOCOLS,
            "registration_conflict": REGISTRATION_CONFLICT_RULES, "follower_out_of_range": FOLLOWER_OUT_OF_RANGE_RULES,
            "isr_lag_rule": ISR_LAG_RULES, "isr_expiration_period": ISR_EXPIRATION_PERIODS,
            "request_time_source": ("model", "measured")}

_FIELD_NAMES = {f.name for f in fields(BrokerConfig)}


@dataclass(frozen=True)
class ClientDefaults:
    """What the Java clients of a profile's Kafka version do unless told otherwise."""
    partitioner: str  # keyless records: "round_robin" (before 2.4) or "sticky" (KIP-480, 2.4+)
    validate_positions: bool  # KIP-320 (2.1+): a consumer checks its position after a leader change
    enable_idempotence: bool  # the producer's enable.idempotence default (true from 3.0, KIP-679)
    # The idempotent producer's epoch bump: "per_partition" restarts every partition's
    # sequences at 0 (KAFKA-12152, 2.8+), "in_flight" only those with batches in flight
    # (2.7 and before). kafka-0.8 has no idempotent producer; its value is never used.
    sequence_restart: str


SEQUENCE_RESTARTS = ("per_partition", "in_flight")

CLIENT_PROFILES: dict[str, ClientDefaults] = {
    "kafka-3.0": ClientDefaults(partitioner="sticky", validate_positions=True, enable_idempotence=True,
                                sequence_restart="per_partition"),
    "kafka-2.7": ClientDefaults(partitioner="sticky", validate_positions=True, enable_idempotence=False,
                                sequence_restart="in_flight"),
    "kafka-0.8": ClientDefaults(partitioner="round_robin", validate_positions=False, enable_idempotence=False,
                                sequence_restart="in_flight"),
}


def client_defaults(profile: str) -> ClientDefaults:
    if profile not in CLIENT_PROFILES:
        raise ConfigError("profile", f"unknown profile {profile!r}; known: {', '.join(sorted(PROFILES))}")
    return CLIENT_PROFILES[profile]


def attribute_name(key: str) -> str:
    return key.replace(".", "_")


def kafka_name(attribute: str) -> str:
    return attribute if attribute in ISRLAB_KEYS else attribute.replace("_", ".")


def broker_config(profile: str = "kafka-2.7", overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
    if profile not in PROFILES:
        raise ConfigError("profile", f"unknown profile {profile!r}; known: {', '.join(sorted(PROFILES))}")
    base = replace(BrokerConfig(), **PROFILES[profile])
    return base.with_overrides(overrides or {})


def topic_config(base: BrokerConfig, overrides: Mapping[str, Any]) -> BrokerConfig:
    """The effective configuration of one topic: the broker's, overridden per topic."""
    mapped = {}
    for key in sorted(overrides):
        if key not in TOPIC_KEYS:
            raise ConfigError(key, f"unknown topic configuration key; known: {', '.join(sorted(TOPIC_KEYS))}")
        mapped[TOPIC_KEYS[key]] = overrides[key]
    try:
        return base.with_overrides(mapped)
    except ConfigError as error:
        # Name the setting as the topic's owner wrote it (cleanup.policy, not log.cleanup.policy).
        named = [key for key in sorted(overrides) if kafka_name(TOPIC_KEYS[key]) == error.key]
        if not named:
            raise
        raise ConfigError(named[0], error.message) from None


# -- log compaction (issue 22, the cleaner's slice) ------------------------------------------
# Values that are neither ints nor bools: cleanup.policy (ConfigDef LIST with
# ValidList.in("compact", "delete")) and min.cleanable.dirty.ratio (DOUBLE, between(0, 1)),
# and the lag rules of LogConfig.validateValues. The other keys stay ints and bools, checked
# as before.
CLEANUP_POLICIES = ("compact", "delete")
CLEANER_VALUE_KEYS = frozenset({"log_cleanup_policy", "log_cleaner_min_cleanable_ratio",
                                "log_cleaner_max_compaction_lag_ms", "log_cleaner_enable"})
# (A topic key's text in a config node is parsed by its Kafka type: dynamic_config._parse_value.)


def cleanup_policies(policy: str) -> tuple[str, ...]:
    """The policies a cleanup.policy value names ("compact,delete" -> both), lower case,
    as LogConfig.compact and LogConfig.delete read the list."""
    return tuple(part.strip().lower() for part in policy.split(",") if part.strip())


def normalize_cleaner_value(attribute: str, value: Any) -> Any:
    """cleanup.policy given as a list (YAML, a client's list) becomes its comma-joined text;
    an int ratio (0 or 1) becomes a float. Other values pass unchanged, to be checked."""
    if attribute == "log_cleanup_policy" and isinstance(value, (list, tuple)) and all(
            isinstance(part, str) for part in value):
        return ",".join(part.strip().lower() for part in value)
    if attribute == "log_cleanup_policy" and isinstance(value, str):
        return ",".join(cleanup_policies(value))
    if attribute == "log_cleaner_min_cleanable_ratio" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def validate_cleaner_value(attribute: str, value: Any) -> None:
    name = kafka_name(attribute)
    if attribute == "log_cleanup_policy":
        policies = cleanup_policies(value) if isinstance(value, str) else ()
        if not policies or any(policy not in CLEANUP_POLICIES for policy in policies):
            raise ConfigError(name, f"must be a list of {' and '.join(CLEANUP_POLICIES)} (got {value!r})")
    elif attribute == "log_cleaner_min_cleanable_ratio":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ConfigError(name, f"must be a number between 0 and 1 (got {value!r})")
    elif attribute == "log_cleaner_enable":
        if not isinstance(value, bool):
            raise ConfigError(name, "must be true or false")
    elif attribute == "log_cleaner_max_compaction_lag_ms":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(name, f"must be an integer of at least 1 (got {value!r})")


def validate_compaction_lags(min_lag_ms: int, max_lag_ms: int) -> None:
    """LogConfig.validateValues: min.compaction.lag.ms may not exceed max.compaction.lag.ms."""
    if min_lag_ms > max_lag_ms:
        raise ConfigError("log.cleaner.min.compaction.lag.ms",
                          f"({min_lag_ms}) must not exceed log.cleaner.max.compaction.lag.ms ({max_lag_ms})")


# -- end of log compaction -------------------------------------------------------------------
