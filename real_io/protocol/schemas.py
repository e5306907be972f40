"""Kafka's message schemas at 2.7.0, as tables; written by _generate.py from
clients/src/main/resources/common/message/*.json. Do not edit by hand."""
from real_io.protocol.schema import F, Message

MESSAGES = {
    (18, False): Message(18, 'ApiVersionsRequest', (0, 3), (3, None), (
        F('client_software_name', 'string', (3, None)),
        F('client_software_version', 'string', (3, None)),
    )),
    (18, True): Message(18, 'ApiVersionsResponse', (0, 3), (3, None), (
        F('error_code', 'int16', (0, None)),
        F('api_keys', '[]struct', (0, None), fields=(
            F('api_key', 'int16', (0, None)),
            F('min_version', 'int16', (0, None)),
            F('max_version', 'int16', (0, None)),
        )),
        F('throttle_time_ms', 'int32', (1, None)),
        F('supported_features', '[]struct', (3, None), tag=0, fields=(
            F('name', 'string', (3, None)),
            F('min_version', 'int16', (3, None)),
            F('max_version', 'int16', (3, None)),
        )),
        F('finalized_features_epoch', 'int64', (3, None), tag=1, default='-1'),
        F('finalized_features', '[]struct', (3, None), tag=2, fields=(
            F('name', 'string', (3, None)),
            F('max_version_level', 'int16', (3, None)),
            F('min_version_level', 'int16', (3, None)),
        )),
    )),
    (3, False): Message(3, 'MetadataRequest', (0, 9), (9, None), (
        F('topics', '[]struct', (0, None), nullable=(1, None), fields=(
            F('name', 'string', (0, None)),
        )),
        F('allow_auto_topic_creation', 'bool', (4, None), default='true'),
        F('include_cluster_authorized_operations', 'bool', (8, None)),
        F('include_topic_authorized_operations', 'bool', (8, None)),
    )),
    (3, True): Message(3, 'MetadataResponse', (0, 9), (9, None), (
        F('throttle_time_ms', 'int32', (3, None)),
        F('brokers', '[]struct', (0, None), fields=(
            F('node_id', 'int32', (0, None)),
            F('host', 'string', (0, None)),
            F('port', 'int32', (0, None)),
            F('rack', 'string', (1, None), nullable=(1, None), default='null'),
        )),
        F('cluster_id', 'string', (2, None), nullable=(2, None), default='null'),
        F('controller_id', 'int32', (1, None), default='-1'),
        F('topics', '[]struct', (0, None), fields=(
            F('error_code', 'int16', (0, None)),
            F('name', 'string', (0, None)),
            F('is_internal', 'bool', (1, None), default='false'),
            F('partitions', '[]struct', (0, None), fields=(
                F('error_code', 'int16', (0, None)),
                F('partition_index', 'int32', (0, None)),
                F('leader_id', 'int32', (0, None)),
                F('leader_epoch', 'int32', (7, None), default='-1'),
                F('replica_nodes', '[]int32', (0, None)),
                F('isr_nodes', '[]int32', (0, None)),
                F('offline_replicas', '[]int32', (5, None)),
            )),
            F('topic_authorized_operations', 'int32', (8, None), default='-2147483648'),
        )),
        F('cluster_authorized_operations', 'int32', (8, None), default='-2147483648'),
    )),
    (0, False): Message(0, 'ProduceRequest', (0, 8), None, (
        F('transactional_id', 'string', (3, None), nullable=(0, None)),
        F('acks', 'int16', (0, None)),
        F('timeout_ms', 'int32', (0, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('records', 'bytes', (0, None), nullable=(0, None)),
            )),
        )),
    )),
    (0, True): Message(0, 'ProduceResponse', (0, 8), None, (
        F('responses', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
                F('base_offset', 'int64', (0, None)),
                F('log_append_time_ms', 'int64', (2, None), default='-1'),
                F('log_start_offset', 'int64', (5, None), default='-1'),
                F('record_errors', '[]struct', (8, None), fields=(
                    F('batch_index', 'int32', (8, None)),
                    F('batch_index_error_message', 'string', (8, None), nullable=(8, None), default='null'),
                )),
                F('error_message', 'string', (8, None), nullable=(8, None), default='null'),
            )),
        )),
        F('throttle_time_ms', 'int32', (1, None)),
    )),
    (1, False): Message(1, 'FetchRequest', (0, 12), (12, None), (
        F('cluster_id', 'string', (12, None), nullable=(12, None), tag=0, default='null'),
        F('replica_id', 'int32', (0, None)),
        F('max_wait_ms', 'int32', (0, None)),
        F('min_bytes', 'int32', (0, None)),
        F('max_bytes', 'int32', (3, None), default='0x7fffffff'),
        F('isolation_level', 'int8', (4, None), default='0'),
        F('session_id', 'int32', (7, None), default='0'),
        F('session_epoch', 'int32', (7, None), default='-1'),
        F('topics', '[]struct', (0, None), fields=(
            F('topic', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition', 'int32', (0, None)),
                F('current_leader_epoch', 'int32', (9, None), default='-1'),
                F('fetch_offset', 'int64', (0, None)),
                F('last_fetched_epoch', 'int32', (12, None), default='-1'),
                F('log_start_offset', 'int64', (5, None), default='-1'),
                F('partition_max_bytes', 'int32', (0, None)),
            )),
        )),
        F('forgotten_topics_data', '[]struct', (7, None), fields=(
            F('topic', 'string', (7, None)),
            F('partitions', '[]int32', (7, None)),
        )),
        F('rack_id', 'string', (11, None), default=''),
    )),
    (1, True): Message(1, 'FetchResponse', (0, 12), (12, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('error_code', 'int16', (7, None)),
        F('session_id', 'int32', (7, None), default='0'),
        F('responses', '[]struct', (0, None), fields=(
            F('topic', 'string', (0, None)),
            F('partition_responses', '[]struct', (0, None), fields=(
                F('partition', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
                F('high_watermark', 'int64', (0, None)),
                F('last_stable_offset', 'int64', (4, None), default='-1'),
                F('log_start_offset', 'int64', (5, None), default='-1'),
                F('diverging_epoch', 'struct', (12, None), tag=0, fields=(
                    F('epoch', 'int32', (12, None), default='-1'),
                    F('end_offset', 'int64', (12, None), default='-1'),
                )),
                F('current_leader', 'struct', (12, None), tag=1, fields=(
                    F('leader_id', 'int32', (12, None), default='-1'),
                    F('leader_epoch', 'int32', (12, None), default='-1'),
                )),
                F('aborted_transactions', '[]struct', (4, None), nullable=(4, None), fields=(
                    F('producer_id', 'int64', (4, None)),
                    F('first_offset', 'int64', (4, None)),
                )),
                F('preferred_read_replica', 'int32', (11, None), default='-1'),
                F('record_set', 'records', (0, None), nullable=(0, None)),
            )),
        )),
    )),
    (2, False): Message(2, 'ListOffsetRequest', (0, 5), None, (
        F('replica_id', 'int32', (0, None)),
        F('isolation_level', 'int8', (2, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('current_leader_epoch', 'int32', (4, None), default='-1'),
                F('timestamp', 'int64', (0, None)),
                F('max_num_offsets', 'int32', (0, 0), default='1'),
            )),
        )),
    )),
    (2, True): Message(2, 'ListOffsetResponse', (0, 5), None, (
        F('throttle_time_ms', 'int32', (2, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
                F('old_style_offsets', '[]int64', (0, 0)),
                F('timestamp', 'int64', (1, None), default='-1'),
                F('offset', 'int64', (1, None), default='-1'),
                F('leader_epoch', 'int32', (4, None), default='-1'),
            )),
        )),
    )),
    (19, False): Message(19, 'CreateTopicsRequest', (0, 6), (5, None), (
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('num_partitions', 'int32', (0, None)),
            F('replication_factor', 'int16', (0, None)),
            F('assignments', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('broker_ids', '[]int32', (0, None)),
            )),
            F('configs', '[]struct', (0, None), fields=(
                F('name', 'string', (0, None)),
                F('value', 'string', (0, None), nullable=(0, None)),
            )),
        )),
        F('timeout_ms', 'int32', (0, None), default='60000'),
        F('validate_only', 'bool', (1, None), default='false'),
    )),
    (19, True): Message(19, 'CreateTopicsResponse', (0, 6), (5, None), (
        F('throttle_time_ms', 'int32', (2, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (1, None), nullable=(0, None)),
            F('topic_config_error_code', 'int16', (5, None), tag=0),
            F('num_partitions', 'int32', (5, None), default='-1'),
            F('replication_factor', 'int16', (5, None), default='-1'),
            F('configs', '[]struct', (5, None), nullable=(5, None), fields=(
                F('name', 'string', (5, None)),
                F('value', 'string', (5, None), nullable=(5, None)),
                F('read_only', 'bool', (5, None)),
                F('config_source', 'int8', (5, None), default='-1'),
                F('is_sensitive', 'bool', (5, None)),
            )),
        )),
    )),
    (20, False): Message(20, 'DeleteTopicsRequest', (0, 5), (4, None), (
        F('topic_names', '[]string', (0, None)),
        F('timeout_ms', 'int32', (0, None)),
    )),
    (20, True): Message(20, 'DeleteTopicsResponse', (0, 5), (4, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('responses', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (5, None), nullable=(5, None), default='null'),
        )),
    )),
    (22, False): Message(22, 'InitProducerIdRequest', (0, 4), (2, None), (
        F('transactional_id', 'string', (0, None), nullable=(0, None)),
        F('transaction_timeout_ms', 'int32', (0, None)),
        F('producer_id', 'int64', (3, None), default='-1'),
        F('producer_epoch', 'int16', (3, None), default='-1'),
    )),
    (22, True): Message(22, 'InitProducerIdResponse', (0, 4), (2, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('error_code', 'int16', (0, None)),
        F('producer_id', 'int64', (0, None), default='-1'),
        F('producer_epoch', 'int16', (0, None)),
    )),
    (23, False): Message(23, 'OffsetForLeaderEpochRequest', (0, 3), None, (
        F('replica_id', 'int32', (3, None), default='-2'),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('current_leader_epoch', 'int32', (2, None), default='-1'),
                F('leader_epoch', 'int32', (0, None)),
            )),
        )),
    )),
    (23, True): Message(23, 'OffsetForLeaderEpochResponse', (0, 3), None, (
        F('throttle_time_ms', 'int32', (2, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('error_code', 'int16', (0, None)),
                F('partition_index', 'int32', (0, None)),
                F('leader_epoch', 'int32', (1, None), default='-1'),
                F('end_offset', 'int64', (0, None)),
            )),
        )),
    )),
    (32, False): Message(32, 'DescribeConfigsRequest', (0, 3), None, (
        F('resources', '[]struct', (0, None), fields=(
            F('resource_type', 'int8', (0, None)),
            F('resource_name', 'string', (0, None)),
            F('configuration_keys', '[]string', (0, None), nullable=(0, None)),
        )),
        F('include_synonyms', 'bool', (1, None), default='false'),
        F('include_documentation', 'bool', (3, None), default='false'),
    )),
    (32, True): Message(32, 'DescribeConfigsResponse', (0, 3), None, (
        F('throttle_time_ms', 'int32', (0, None)),
        F('results', '[]struct', (0, None), fields=(
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (0, None), nullable=(0, None)),
            F('resource_type', 'int8', (0, None)),
            F('resource_name', 'string', (0, None)),
            F('configs', '[]struct', (0, None), fields=(
                F('name', 'string', (0, None)),
                F('value', 'string', (0, None), nullable=(0, None)),
                F('read_only', 'bool', (0, None)),
                F('is_default', 'bool', (0, 0)),
                F('config_source', 'int8', (1, None), default='-1'),
                F('is_sensitive', 'bool', (0, None)),
                F('synonyms', '[]struct', (1, None), fields=(
                    F('name', 'string', (1, None)),
                    F('value', 'string', (1, None), nullable=(0, None)),
                    F('source', 'int8', (1, None)),
                )),
                F('config_type', 'int8', (3, None), default='0'),
                F('documentation', 'string', (3, None), nullable=(0, None)),
            )),
        )),
    )),
    (10, False): Message(10, 'FindCoordinatorRequest', (0, 3), (3, None), (
        F('key', 'string', (0, None)),
        F('key_type', 'int8', (1, None), default='0'),
    )),
    (10, True): Message(10, 'FindCoordinatorResponse', (0, 3), (3, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('error_code', 'int16', (0, None)),
        F('error_message', 'string', (1, None), nullable=(1, None)),
        F('node_id', 'int32', (0, None)),
        F('host', 'string', (0, None)),
        F('port', 'int32', (0, None)),
    )),
    (4, False): Message(4, 'LeaderAndIsrRequest', (0, 4), (4, None), (
        F('controller_id', 'int32', (0, None)),
        F('controller_epoch', 'int32', (0, None)),
        F('broker_epoch', 'int64', (2, None), default='-1'),
        F('ungrouped_partition_states', '[]struct', (0, 1), fields=(
            F('topic_name', 'string', (0, 1)),
            F('partition_index', 'int32', (0, None)),
            F('controller_epoch', 'int32', (0, None)),
            F('leader', 'int32', (0, None)),
            F('leader_epoch', 'int32', (0, None)),
            F('isr', '[]int32', (0, None)),
            F('zk_version', 'int32', (0, None)),
            F('replicas', '[]int32', (0, None)),
            F('adding_replicas', '[]int32', (3, None)),
            F('removing_replicas', '[]int32', (3, None)),
            F('is_new', 'bool', (1, None), default='false'),
        )),
        F('topic_states', '[]struct', (2, None), fields=(
            F('topic_name', 'string', (2, None)),
            F('partition_states', '[]struct', (2, None), fields=(
                F('topic_name', 'string', (0, 1)),
                F('partition_index', 'int32', (0, None)),
                F('controller_epoch', 'int32', (0, None)),
                F('leader', 'int32', (0, None)),
                F('leader_epoch', 'int32', (0, None)),
                F('isr', '[]int32', (0, None)),
                F('zk_version', 'int32', (0, None)),
                F('replicas', '[]int32', (0, None)),
                F('adding_replicas', '[]int32', (3, None)),
                F('removing_replicas', '[]int32', (3, None)),
                F('is_new', 'bool', (1, None), default='false'),
            )),
        )),
        F('live_leaders', '[]struct', (0, None), fields=(
            F('broker_id', 'int32', (0, None)),
            F('host_name', 'string', (0, None)),
            F('port', 'int32', (0, None)),
        )),
    )),
    (4, True): Message(4, 'LeaderAndIsrResponse', (0, 4), (4, None), (
        F('error_code', 'int16', (0, None)),
        F('partition_errors', '[]struct', (0, None), fields=(
            F('topic_name', 'string', (0, None)),
            F('partition_index', 'int32', (0, None)),
            F('error_code', 'int16', (0, None)),
        )),
    )),
    (6, False): Message(6, 'UpdateMetadataRequest', (0, 6), (6, None), (
        F('controller_id', 'int32', (0, None)),
        F('controller_epoch', 'int32', (0, None)),
        F('broker_epoch', 'int64', (5, None), default='-1'),
        F('ungrouped_partition_states', '[]struct', (0, 4), fields=(
            F('topic_name', 'string', (0, 4)),
            F('partition_index', 'int32', (0, None)),
            F('controller_epoch', 'int32', (0, None)),
            F('leader', 'int32', (0, None)),
            F('leader_epoch', 'int32', (0, None)),
            F('isr', '[]int32', (0, None)),
            F('zk_version', 'int32', (0, None)),
            F('replicas', '[]int32', (0, None)),
            F('offline_replicas', '[]int32', (4, None)),
        )),
        F('topic_states', '[]struct', (5, None), fields=(
            F('topic_name', 'string', (5, None)),
            F('partition_states', '[]struct', (5, None), fields=(
                F('topic_name', 'string', (0, 4)),
                F('partition_index', 'int32', (0, None)),
                F('controller_epoch', 'int32', (0, None)),
                F('leader', 'int32', (0, None)),
                F('leader_epoch', 'int32', (0, None)),
                F('isr', '[]int32', (0, None)),
                F('zk_version', 'int32', (0, None)),
                F('replicas', '[]int32', (0, None)),
                F('offline_replicas', '[]int32', (4, None)),
            )),
        )),
        F('live_brokers', '[]struct', (0, None), fields=(
            F('id', 'int32', (0, None)),
            F('v0_host', 'string', (0, 0)),
            F('v0_port', 'int32', (0, 0)),
            F('endpoints', '[]struct', (1, None), fields=(
                F('port', 'int32', (1, None)),
                F('host', 'string', (1, None)),
                F('listener', 'string', (3, None)),
                F('security_protocol', 'int16', (1, None)),
            )),
            F('rack', 'string', (2, None), nullable=(0, None)),
        )),
    )),
    (6, True): Message(6, 'UpdateMetadataResponse', (0, 6), (6, None), (
        F('error_code', 'int16', (0, None)),
    )),
    (5, False): Message(5, 'StopReplicaRequest', (0, 3), (2, None), (
        F('controller_id', 'int32', (0, None)),
        F('controller_epoch', 'int32', (0, None)),
        F('broker_epoch', 'int64', (1, None), default='-1'),
        F('delete_partitions', 'bool', (0, 2)),
        F('ungrouped_partitions', '[]struct', (0, 0), fields=(
            F('topic_name', 'string', (0, 0)),
            F('partition_index', 'int32', (0, 0)),
        )),
        F('topics', '[]struct', (1, 2), fields=(
            F('name', 'string', (1, 2)),
            F('partition_indexes', '[]int32', (1, 2)),
        )),
        F('topic_states', '[]struct', (3, None), fields=(
            F('topic_name', 'string', (3, None)),
            F('partition_states', '[]struct', (3, None), fields=(
                F('partition_index', 'int32', (3, None)),
                F('leader_epoch', 'int32', (3, None), default='-1'),
                F('delete_partition', 'bool', (3, None)),
            )),
        )),
    )),
    (5, True): Message(5, 'StopReplicaResponse', (0, 3), (2, None), (
        F('error_code', 'int16', (0, None)),
        F('partition_errors', '[]struct', (0, None), fields=(
            F('topic_name', 'string', (0, None)),
            F('partition_index', 'int32', (0, None)),
            F('error_code', 'int16', (0, None)),
        )),
    )),
    (7, False): Message(7, 'ControlledShutdownRequest', (0, 3), (3, None), (
        F('broker_id', 'int32', (0, None)),
        F('broker_epoch', 'int64', (2, None), default='-1'),
    )),
    (7, True): Message(7, 'ControlledShutdownResponse', (0, 3), (3, None), (
        F('error_code', 'int16', (0, None)),
        F('remaining_partitions', '[]struct', (0, None), fields=(
            F('topic_name', 'string', (0, None)),
            F('partition_index', 'int32', (0, None)),
        )),
    )),
    (56, False): Message(56, 'AlterIsrRequest', (0, 0), (0, None), (
        F('broker_id', 'int32', (0, None)),
        F('broker_epoch', 'int64', (0, None), default='-1'),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('leader_epoch', 'int32', (0, None)),
                F('new_isr', '[]int32', (0, None)),
                F('current_isr_version', 'int32', (0, None)),
            )),
        )),
    )),
    (56, True): Message(56, 'AlterIsrResponse', (0, 0), (0, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('error_code', 'int16', (0, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
                F('leader_id', 'int32', (0, None)),
                F('leader_epoch', 'int32', (0, None)),
                F('isr', '[]int32', (0, None)),
                F('current_isr_version', 'int32', (0, None)),
            )),
        )),
    )),
    (33, False): Message(33, 'AlterConfigsRequest', (0, 1), None, (
        F('resources', '[]struct', (0, None), fields=(
            F('resource_type', 'int8', (0, None)),
            F('resource_name', 'string', (0, None)),
            F('configs', '[]struct', (0, None), fields=(
                F('name', 'string', (0, None)),
                F('value', 'string', (0, None), nullable=(0, None)),
            )),
        )),
        F('validate_only', 'bool', (0, None)),
    )),
    (33, True): Message(33, 'AlterConfigsResponse', (0, 1), None, (
        F('throttle_time_ms', 'int32', (0, None)),
        F('responses', '[]struct', (0, None), fields=(
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (0, None), nullable=(0, None)),
            F('resource_type', 'int8', (0, None)),
            F('resource_name', 'string', (0, None)),
        )),
    )),
    (44, False): Message(44, 'IncrementalAlterConfigsRequest', (0, 1), (1, None), (
        F('resources', '[]struct', (0, None), fields=(
            F('resource_type', 'int8', (0, None)),
            F('resource_name', 'string', (0, None)),
            F('configs', '[]struct', (0, None), fields=(
                F('name', 'string', (0, None)),
                F('config_operation', 'int8', (0, None)),
                F('value', 'string', (0, None), nullable=(0, None)),
            )),
        )),
        F('validate_only', 'bool', (0, None)),
    )),
    (44, True): Message(44, 'IncrementalAlterConfigsResponse', (0, 1), (1, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('responses', '[]struct', (0, None), fields=(
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (0, None), nullable=(0, None)),
            F('resource_type', 'int8', (0, None)),
            F('resource_name', 'string', (0, None)),
        )),
    )),
    (37, False): Message(37, 'CreatePartitionsRequest', (0, 3), (2, None), (
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('count', 'int32', (0, None)),
            F('assignments', '[]struct', (0, None), nullable=(0, None), fields=(
                F('broker_ids', '[]int32', (0, None)),
            )),
        )),
        F('timeout_ms', 'int32', (0, None)),
        F('validate_only', 'bool', (0, None)),
    )),
    (37, True): Message(37, 'CreatePartitionsResponse', (0, 3), (2, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('results', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (0, None), nullable=(0, None), default='null'),
        )),
    )),
    (48, False): Message(48, 'DescribeClientQuotasRequest', (0, 0), None, (
        F('components', '[]struct', (0, None), fields=(
            F('entity_type', 'string', (0, None)),
            F('match_type', 'int8', (0, None)),
            F('match', 'string', (0, None), nullable=(0, None)),
        )),
        F('strict', 'bool', (0, None)),
    )),
    (48, True): Message(48, 'DescribeClientQuotasResponse', (0, 0), None, (
        F('throttle_time_ms', 'int32', (0, None)),
        F('error_code', 'int16', (0, None)),
        F('error_message', 'string', (0, None), nullable=(0, None)),
        F('entries', '[]struct', (0, None), nullable=(0, None), fields=(
            F('entity', '[]struct', (0, None), fields=(
                F('entity_type', 'string', (0, None)),
                F('entity_name', 'string', (0, None), nullable=(0, None)),
            )),
            F('values', '[]struct', (0, None), fields=(
                F('key', 'string', (0, None)),
                F('value', 'float64', (0, None)),
            )),
        )),
    )),
    (49, False): Message(49, 'AlterClientQuotasRequest', (0, 0), None, (
        F('entries', '[]struct', (0, None), fields=(
            F('entity', '[]struct', (0, None), fields=(
                F('entity_type', 'string', (0, None)),
                F('entity_name', 'string', (0, None), nullable=(0, None)),
            )),
            F('ops', '[]struct', (0, None), fields=(
                F('key', 'string', (0, None)),
                F('value', 'float64', (0, None)),
                F('remove', 'bool', (0, None)),
            )),
        )),
        F('validate_only', 'bool', (0, None)),
    )),
    (49, True): Message(49, 'AlterClientQuotasResponse', (0, 0), None, (
        F('throttle_time_ms', 'int32', (0, None)),
        F('entries', '[]struct', (0, None), fields=(
            F('error_code', 'int16', (0, None)),
            F('error_message', 'string', (0, None), nullable=(0, None)),
            F('entity', '[]struct', (0, None), fields=(
                F('entity_type', 'string', (0, None)),
                F('entity_name', 'string', (0, None), nullable=(0, None)),
            )),
        )),
    )),
    (45, False): Message(45, 'AlterPartitionReassignmentsRequest', (0, 0), (0, None), (
        F('timeout_ms', 'int32', (0, None), default='60000'),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('replicas', '[]int32', (0, None), nullable=(0, None), default='null'),
            )),
        )),
    )),
    (45, True): Message(45, 'AlterPartitionReassignmentsResponse', (0, 0), (0, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('error_code', 'int16', (0, None)),
        F('error_message', 'string', (0, None), nullable=(0, None)),
        F('responses', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
                F('error_message', 'string', (0, None), nullable=(0, None)),
            )),
        )),
    )),
    (46, False): Message(46, 'ListPartitionReassignmentsRequest', (0, 0), (0, None), (
        F('timeout_ms', 'int32', (0, None), default='60000'),
        F('topics', '[]struct', (0, None), nullable=(0, None), default='null', fields=(
            F('name', 'string', (0, None)),
            F('partition_indexes', '[]int32', (0, None)),
        )),
    )),
    (46, True): Message(46, 'ListPartitionReassignmentsResponse', (0, 0), (0, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('error_code', 'int16', (0, None)),
        F('error_message', 'string', (0, None), nullable=(0, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('replicas', '[]int32', (0, None)),
                F('adding_replicas', '[]int32', (0, None)),
                F('removing_replicas', '[]int32', (0, None)),
            )),
        )),
    )),
}
