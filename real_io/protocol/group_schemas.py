"""Kafka's consumer-group message schemas at 2.7.0, as tables; written by _generate.py from
clients/src/main/resources/common/message/*.json. Do not edit by hand."""
from real_io.protocol.schema import F, Message

MESSAGES = {
    (11, False): Message(11, 'JoinGroupRequest', (0, 7), (6, None), (
        F('group_id', 'string', (0, None)),
        F('session_timeout_ms', 'int32', (0, None)),
        F('rebalance_timeout_ms', 'int32', (1, None), default='-1'),
        F('member_id', 'string', (0, None)),
        F('group_instance_id', 'string', (5, None), nullable=(5, None), default='null'),
        F('protocol_type', 'string', (0, None)),
        F('protocols', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('metadata', 'bytes', (0, None)),
        )),
    )),
    (11, True): Message(11, 'JoinGroupResponse', (0, 7), (6, None), (
        F('throttle_time_ms', 'int32', (2, None)),
        F('error_code', 'int16', (0, None)),
        F('generation_id', 'int32', (0, None), default='-1'),
        F('protocol_type', 'string', (7, None), nullable=(7, None), default='null'),
        F('protocol_name', 'string', (0, None), nullable=(7, None)),
        F('leader', 'string', (0, None)),
        F('member_id', 'string', (0, None)),
        F('members', '[]struct', (0, None), fields=(
            F('member_id', 'string', (0, None)),
            F('group_instance_id', 'string', (5, None), nullable=(5, None), default='null'),
            F('metadata', 'bytes', (0, None)),
        )),
    )),
    (12, False): Message(12, 'HeartbeatRequest', (0, 4), (4, None), (
        F('group_id', 'string', (0, None)),
        F('generation_id', 'int32', (0, None)),
        F('member_id', 'string', (0, None)),
        F('group_instance_id', 'string', (3, None), nullable=(3, None), default='null'),
    )),
    (12, True): Message(12, 'HeartbeatResponse', (0, 4), (4, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('error_code', 'int16', (0, None)),
    )),
    (13, False): Message(13, 'LeaveGroupRequest', (0, 4), (4, None), (
        F('group_id', 'string', (0, None)),
        F('member_id', 'string', (0, 2)),
        F('members', '[]struct', (3, None), fields=(
            F('member_id', 'string', (3, None)),
            F('group_instance_id', 'string', (3, None), nullable=(3, None), default='null'),
        )),
    )),
    (13, True): Message(13, 'LeaveGroupResponse', (0, 4), (4, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('error_code', 'int16', (0, None)),
        F('members', '[]struct', (3, None), fields=(
            F('member_id', 'string', (3, None)),
            F('group_instance_id', 'string', (3, None), nullable=(3, None)),
            F('error_code', 'int16', (3, None)),
        )),
    )),
    (14, False): Message(14, 'SyncGroupRequest', (0, 5), (4, None), (
        F('group_id', 'string', (0, None)),
        F('generation_id', 'int32', (0, None)),
        F('member_id', 'string', (0, None)),
        F('group_instance_id', 'string', (3, None), nullable=(3, None), default='null'),
        F('protocol_type', 'string', (5, None), nullable=(5, None), default='null'),
        F('protocol_name', 'string', (5, None), nullable=(5, None), default='null'),
        F('assignments', '[]struct', (0, None), fields=(
            F('member_id', 'string', (0, None)),
            F('assignment', 'bytes', (0, None)),
        )),
    )),
    (14, True): Message(14, 'SyncGroupResponse', (0, 5), (4, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('error_code', 'int16', (0, None)),
        F('protocol_type', 'string', (5, None), nullable=(5, None), default='null'),
        F('protocol_name', 'string', (5, None), nullable=(5, None), default='null'),
        F('assignment', 'bytes', (0, None)),
    )),
    (8, False): Message(8, 'OffsetCommitRequest', (0, 8), (8, None), (
        F('group_id', 'string', (0, None)),
        F('generation_id', 'int32', (1, None), default='-1'),
        F('member_id', 'string', (1, None)),
        F('group_instance_id', 'string', (7, None), nullable=(7, None), default='null'),
        F('retention_time_ms', 'int64', (2, 4), default='-1'),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('committed_offset', 'int64', (0, None)),
                F('committed_leader_epoch', 'int32', (6, None), default='-1'),
                F('commit_timestamp', 'int64', (1, 1), default='-1'),
                F('committed_metadata', 'string', (0, None), nullable=(0, None)),
            )),
        )),
    )),
    (8, True): Message(8, 'OffsetCommitResponse', (0, 8), (8, None), (
        F('throttle_time_ms', 'int32', (3, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
            )),
        )),
    )),
    (9, False): Message(9, 'OffsetFetchRequest', (0, 7), (6, None), (
        F('group_id', 'string', (0, None)),
        F('topics', '[]struct', (0, None), nullable=(2, None), fields=(
            F('name', 'string', (0, None)),
            F('partition_indexes', '[]int32', (0, None)),
        )),
        F('require_stable', 'bool', (7, None), default='false'),
    )),
    (9, True): Message(9, 'OffsetFetchResponse', (0, 7), (6, None), (
        F('throttle_time_ms', 'int32', (3, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('committed_offset', 'int64', (0, None)),
                F('committed_leader_epoch', 'int32', (5, None), default='-1'),
                F('metadata', 'string', (0, None), nullable=(0, None)),
                F('error_code', 'int16', (0, None)),
            )),
        )),
        F('error_code', 'int16', (2, None), default='0'),
    )),
    (15, False): Message(15, 'DescribeGroupsRequest', (0, 5), (5, None), (
        F('groups', '[]string', (0, None)),
        F('include_authorized_operations', 'bool', (3, None)),
    )),
    (15, True): Message(15, 'DescribeGroupsResponse', (0, 5), (5, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('groups', '[]struct', (0, None), fields=(
            F('error_code', 'int16', (0, None)),
            F('group_id', 'string', (0, None)),
            F('group_state', 'string', (0, None)),
            F('protocol_type', 'string', (0, None)),
            F('protocol_data', 'string', (0, None)),
            F('members', '[]struct', (0, None), fields=(
                F('member_id', 'string', (0, None)),
                F('group_instance_id', 'string', (4, None), nullable=(4, None), default='null'),
                F('client_id', 'string', (0, None)),
                F('client_host', 'string', (0, None)),
                F('member_metadata', 'bytes', (0, None)),
                F('member_assignment', 'bytes', (0, None)),
            )),
            F('authorized_operations', 'int32', (3, None), default='-2147483648'),
        )),
    )),
    (16, False): Message(16, 'ListGroupsRequest', (0, 4), (3, None), (
        F('states_filter', '[]string', (4, None)),
    )),
    (16, True): Message(16, 'ListGroupsResponse', (0, 4), (3, None), (
        F('throttle_time_ms', 'int32', (1, None)),
        F('error_code', 'int16', (0, None)),
        F('groups', '[]struct', (0, None), fields=(
            F('group_id', 'string', (0, None)),
            F('protocol_type', 'string', (0, None)),
            F('group_state', 'string', (4, None)),
        )),
    )),
    (42, False): Message(42, 'DeleteGroupsRequest', (0, 2), (2, None), (
        F('groups_names', '[]string', (0, None)),
    )),
    (42, True): Message(42, 'DeleteGroupsResponse', (0, 2), (2, None), (
        F('throttle_time_ms', 'int32', (0, None)),
        F('results', '[]struct', (0, None), fields=(
            F('group_id', 'string', (0, None)),
            F('error_code', 'int16', (0, None)),
        )),
    )),
    (47, False): Message(47, 'OffsetDeleteRequest', (0, 0), None, (
        F('group_id', 'string', (0, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
            )),
        )),
    )),
    (47, True): Message(47, 'OffsetDeleteResponse', (0, 0), None, (
        F('error_code', 'int16', (0, None)),
        F('throttle_time_ms', 'int32', (0, None)),
        F('topics', '[]struct', (0, None), fields=(
            F('name', 'string', (0, None)),
            F('partitions', '[]struct', (0, None), fields=(
                F('partition_index', 'int32', (0, None)),
                F('error_code', 'int16', (0, None)),
            )),
        )),
    )),
}
