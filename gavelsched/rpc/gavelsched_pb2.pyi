from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Ack(_message.Message):
    __slots__ = ("ok", "message")
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    message: str
    def __init__(self, ok: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("worker_type", "gpus", "address", "hostname", "previous_server_id", "profile", "running")
    WORKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    worker_type: str
    gpus: int
    address: str
    hostname: str
    previous_server_id: int
    profile: WorkerProfile
    running: _containers.RepeatedCompositeFieldContainer[RunningJob]
    def __init__(self, worker_type: _Optional[str] = ..., gpus: _Optional[int] = ..., address: _Optional[str] = ..., hostname: _Optional[str] = ..., previous_server_id: _Optional[int] = ..., profile: _Optional[_Union[WorkerProfile, _Mapping]] = ..., running: _Optional[_Iterable[_Union[RunningJob, _Mapping]]] = ...) -> None: ...

class JobRate(_message.Message):
    __slots__ = ("job_type", "steps_per_s")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    steps_per_s: float
    def __init__(self, job_type: _Optional[str] = ..., steps_per_s: _Optional[float] = ...) -> None: ...

class WorkerProfile(_message.Message):
    __slots__ = ("precision", "device", "reduced", "rates", "torch")
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    REDUCED_FIELD_NUMBER: _ClassVar[int]
    RATES_FIELD_NUMBER: _ClassVar[int]
    TORCH_FIELD_NUMBER: _ClassVar[int]
    precision: str
    device: str
    reduced: bool
    rates: _containers.RepeatedCompositeFieldContainer[JobRate]
    torch: str
    def __init__(self, precision: _Optional[str] = ..., device: _Optional[str] = ..., reduced: _Optional[bool] = ..., rates: _Optional[_Iterable[_Union[JobRate, _Mapping]]] = ..., torch: _Optional[str] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ("server_id", "worker_ids", "round_seconds", "heartbeat_seconds", "registration")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_IDS_FIELD_NUMBER: _ClassVar[int]
    ROUND_SECONDS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    worker_ids: _containers.RepeatedScalarFieldContainer[int]
    round_seconds: float
    heartbeat_seconds: float
    registration: int
    def __init__(self, server_id: _Optional[int] = ..., worker_ids: _Optional[_Iterable[int]] = ..., round_seconds: _Optional[float] = ..., heartbeat_seconds: _Optional[float] = ..., registration: _Optional[int] = ...) -> None: ...

class RunningJob(_message.Message):
    __slots__ = ("job_id", "generation", "round", "gpus")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    generation: int
    round: int
    gpus: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, job_id: _Optional[str] = ..., generation: _Optional[int] = ..., round: _Optional[int] = ..., gpus: _Optional[_Iterable[int]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("server_id", "running", "leaving", "registration", "sent_s", "short_of_room")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    SENT_S_FIELD_NUMBER: _ClassVar[int]
    SHORT_OF_ROOM_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    running: _containers.RepeatedCompositeFieldContainer[RunningJob]
    leaving: bool
    registration: int
    sent_s: float
    short_of_room: str
    def __init__(self, server_id: _Optional[int] = ..., running: _Optional[_Iterable[_Union[RunningJob, _Mapping]]] = ..., leaving: _Optional[bool] = ..., registration: _Optional[int] = ..., sent_s: _Optional[float] = ..., short_of_room: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("known",)
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    known: bool
    def __init__(self, known: _Optional[bool] = ...) -> None: ...

class RoundReportRequest(_message.Message):
    __slots__ = ("server_id", "job_id", "round", "rank", "steps", "seconds", "exit_code", "failed", "reason", "generation")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    job_id: str
    round: int
    rank: int
    steps: int
    seconds: float
    exit_code: int
    failed: bool
    reason: str
    generation: int
    def __init__(self, server_id: _Optional[int] = ..., job_id: _Optional[str] = ..., round: _Optional[int] = ..., rank: _Optional[int] = ..., steps: _Optional[int] = ..., seconds: _Optional[float] = ..., exit_code: _Optional[int] = ..., failed: _Optional[bool] = ..., reason: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("max_steps", "max_seconds", "round", "extended")
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_FIELD_NUMBER: _ClassVar[int]
    max_steps: int
    max_seconds: float
    round: int
    extended: bool
    def __init__(self, max_steps: _Optional[int] = ..., max_seconds: _Optional[float] = ..., round: _Optional[int] = ..., extended: _Optional[bool] = ...) -> None: ...

class InitJobRequest(_message.Message):
    __slots__ = ("job_id", "round", "rank", "server_id", "generation")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    rank: int
    server_id: int
    generation: int
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., rank: _Optional[int] = ..., server_id: _Optional[int] = ..., generation: _Optional[int] = ...) -> None: ...

class InitJobResponse(_message.Message):
    __slots__ = ("lease", "steps_done", "total_steps", "checkpoint_generation")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_GENERATION_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    steps_done: int
    total_steps: int
    checkpoint_generation: int
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ..., steps_done: _Optional[int] = ..., total_steps: _Optional[int] = ..., checkpoint_generation: _Optional[int] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("job_id", "round", "rank", "steps", "seconds", "generation")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    rank: int
    steps: int
    seconds: float
    generation: int
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., rank: _Optional[int] = ..., steps: _Optional[int] = ..., seconds: _Optional[float] = ..., generation: _Optional[int] = ...) -> None: ...

class RenewLeaseResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class ReportStepsRequest(_message.Message):
    __slots__ = ("job_id", "round", "rank", "steps", "seconds", "checkpointed", "generation", "lease_start_s")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTED_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    LEASE_START_S_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    rank: int
    steps: int
    seconds: float
    checkpointed: bool
    generation: int
    lease_start_s: float
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., rank: _Optional[int] = ..., steps: _Optional[int] = ..., seconds: _Optional[float] = ..., checkpointed: _Optional[bool] = ..., generation: _Optional[int] = ..., lease_start_s: _Optional[float] = ...) -> None: ...

class RunJobRequest(_message.Message):
    __slots__ = ("job_id", "round", "job_type", "workload", "command", "total_steps", "steps_done", "lease", "gpus", "rank", "world_size", "master_addr", "master_port", "scheduler_address", "env", "expected_steps_per_s", "checkpoint_dir", "generation", "colocated_job_id", "colocated_job_type")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    MASTER_PORT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_DIR_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    COLOCATED_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    COLOCATED_JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    round: int
    job_type: str
    workload: str
    command: str
    total_steps: int
    steps_done: int
    lease: Lease
    gpus: _containers.RepeatedScalarFieldContainer[int]
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    scheduler_address: str
    env: _containers.ScalarMap[str, str]
    expected_steps_per_s: float
    checkpoint_dir: str
    generation: int
    colocated_job_id: str
    colocated_job_type: str
    def __init__(self, job_id: _Optional[str] = ..., round: _Optional[int] = ..., job_type: _Optional[str] = ..., workload: _Optional[str] = ..., command: _Optional[str] = ..., total_steps: _Optional[int] = ..., steps_done: _Optional[int] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., gpus: _Optional[_Iterable[int]] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., master_addr: _Optional[str] = ..., master_port: _Optional[int] = ..., scheduler_address: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., expected_steps_per_s: _Optional[float] = ..., checkpoint_dir: _Optional[str] = ..., generation: _Optional[int] = ..., colocated_job_id: _Optional[str] = ..., colocated_job_type: _Optional[str] = ...) -> None: ...

class RunJobsRequest(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunJobRequest]
    def __init__(self, runs: _Optional[_Iterable[_Union[RunJobRequest, _Mapping]]] = ...) -> None: ...

class RunJobsResponse(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[Ack]
    def __init__(self, acks: _Optional[_Iterable[_Union[Ack, _Mapping]]] = ...) -> None: ...

class KillJobRequest(_message.Message):
    __slots__ = ("job_id", "reason", "generation")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    generation: int
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class LogFile(_message.Message):
    __slots__ = ("round", "rank", "stream", "size")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    round: int
    rank: int
    stream: str
    size: int
    def __init__(self, round: _Optional[int] = ..., rank: _Optional[int] = ..., stream: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class ReadLogsRequest(_message.Message):
    __slots__ = ("job_id", "file", "offset", "max_bytes")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    file: LogFile
    offset: int
    max_bytes: int
    def __init__(self, job_id: _Optional[str] = ..., file: _Optional[_Union[LogFile, _Mapping]] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ReadLogsResponse(_message.Message):
    __slots__ = ("files", "data")
    FILES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[LogFile]
    data: bytes
    def __init__(self, files: _Optional[_Iterable[_Union[LogFile, _Mapping]]] = ..., data: _Optional[bytes] = ...) -> None: ...

class JobRequest(_message.Message):
    __slots__ = ("job_type", "scale_factor", "total_steps", "priority_weight", "slo_s", "entity", "workload", "command", "mixed", "min_scale_factor", "max_runtime_s", "after", "count")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SLO_S_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    MIXED_FIELD_NUMBER: _ClassVar[int]
    MIN_SCALE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    scale_factor: int
    total_steps: int
    priority_weight: float
    slo_s: float
    entity: str
    workload: str
    command: str
    mixed: bool
    min_scale_factor: int
    max_runtime_s: float
    after: _containers.RepeatedScalarFieldContainer[str]
    count: int
    def __init__(self, job_type: _Optional[str] = ..., scale_factor: _Optional[int] = ..., total_steps: _Optional[int] = ..., priority_weight: _Optional[float] = ..., slo_s: _Optional[float] = ..., entity: _Optional[str] = ..., workload: _Optional[str] = ..., command: _Optional[str] = ..., mixed: _Optional[bool] = ..., min_scale_factor: _Optional[int] = ..., max_runtime_s: _Optional[float] = ..., after: _Optional[_Iterable[str]] = ..., count: _Optional[int] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("job_id", "job_ids", "array_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    ARRAY_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    array_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_ids: _Optional[_Iterable[str]] = ..., array_id: _Optional[str] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class JobControlRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class UpdateRequest(_message.Message):
    __slots__ = ("job_id", "priority_weight", "entity")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    priority_weight: float
    entity: str
    def __init__(self, job_id: _Optional[str] = ..., priority_weight: _Optional[float] = ..., entity: _Optional[str] = ...) -> None: ...

class ReloadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class HistoryEvent(_message.Message):
    __slots__ = ("time_unix", "user", "action", "detail")
    TIME_UNIX_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    time_unix: float
    user: str
    action: str
    detail: str
    def __init__(self, time_unix: _Optional[float] = ..., user: _Optional[str] = ..., action: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[HistoryEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[HistoryEvent, _Mapping]]] = ...) -> None: ...

class UsageRequest(_message.Message):
    __slots__ = ("by", "since_unix")
    BY_FIELD_NUMBER: _ClassVar[int]
    SINCE_UNIX_FIELD_NUMBER: _ClassVar[int]
    by: str
    since_unix: float
    def __init__(self, by: _Optional[str] = ..., since_unix: _Optional[float] = ...) -> None: ...

class UsageLine(_message.Message):
    __slots__ = ("key", "gpu_hours", "cost", "runs", "jobs")
    KEY_FIELD_NUMBER: _ClassVar[int]
    GPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    key: str
    gpu_hours: float
    cost: float
    runs: int
    jobs: int
    def __init__(self, key: _Optional[str] = ..., gpu_hours: _Optional[float] = ..., cost: _Optional[float] = ..., runs: _Optional[int] = ..., jobs: _Optional[int] = ...) -> None: ...

class UsageResponse(_message.Message):
    __slots__ = ("by", "lines", "gpu_hours", "cost", "runs")
    BY_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    GPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    by: str
    lines: _containers.RepeatedCompositeFieldContainer[UsageLine]
    gpu_hours: float
    cost: float
    runs: int
    def __init__(self, by: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[UsageLine, _Mapping]]] = ..., gpu_hours: _Optional[float] = ..., cost: _Optional[float] = ..., runs: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("states", "job_type", "entity", "active", "mine", "user", "period")
    STATES_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    MINE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[str]
    job_type: str
    entity: str
    active: bool
    mine: bool
    user: str
    period: bool
    def __init__(self, states: _Optional[_Iterable[str]] = ..., job_type: _Optional[str] = ..., entity: _Optional[str] = ..., active: _Optional[bool] = ..., mine: _Optional[bool] = ..., user: _Optional[str] = ..., period: _Optional[bool] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("id", "state", "steps_done", "total_steps", "job_type", "scale_factor", "worker_type", "reason", "allocation", "received", "arrival_s", "completion_s", "mixed", "min_scale_factor", "gpus", "entity", "started_s", "ended_s", "steps_per_s", "priority_weight", "startup_s", "user", "array_id", "array_index", "max_runtime_s", "after", "run_s", "eta_start_s", "eta_finish_s", "run_began_s", "run_up_s", "run_refill", "run_ending", "run_lease_steps", "period_x", "period_received_s", "period_deficit_s", "run_next_type", "restart_s", "run_reported_s", "plan_steps_per_s", "exit_s", "startup_alone_s", "shared_with", "period_isolated", "slo_s")
    class AllocationEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ReceivedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class StepsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PeriodXEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PeriodReceivedSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PeriodDeficitSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PlanStepsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STEPS_DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_STEPS_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    WORKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_S_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_S_FIELD_NUMBER: _ClassVar[int]
    MIXED_FIELD_NUMBER: _ClassVar[int]
    MIN_SCALE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    STARTED_S_FIELD_NUMBER: _ClassVar[int]
    ENDED_S_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    STARTUP_S_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    ARRAY_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_INDEX_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_S_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    RUN_S_FIELD_NUMBER: _ClassVar[int]
    ETA_START_S_FIELD_NUMBER: _ClassVar[int]
    ETA_FINISH_S_FIELD_NUMBER: _ClassVar[int]
    RUN_BEGAN_S_FIELD_NUMBER: _ClassVar[int]
    RUN_UP_S_FIELD_NUMBER: _ClassVar[int]
    RUN_REFILL_FIELD_NUMBER: _ClassVar[int]
    RUN_ENDING_FIELD_NUMBER: _ClassVar[int]
    RUN_LEASE_STEPS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_X_FIELD_NUMBER: _ClassVar[int]
    PERIOD_RECEIVED_S_FIELD_NUMBER: _ClassVar[int]
    PERIOD_DEFICIT_S_FIELD_NUMBER: _ClassVar[int]
    RUN_NEXT_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESTART_S_FIELD_NUMBER: _ClassVar[int]
    RUN_REPORTED_S_FIELD_NUMBER: _ClassVar[int]
    PLAN_STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    EXIT_S_FIELD_NUMBER: _ClassVar[int]
    STARTUP_ALONE_S_FIELD_NUMBER: _ClassVar[int]
    SHARED_WITH_FIELD_NUMBER: _ClassVar[int]
    PERIOD_ISOLATED_FIELD_NUMBER: _ClassVar[int]
    SLO_S_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: str
    steps_done: int
    total_steps: int
    job_type: str
    scale_factor: int
    worker_type: str
    reason: str
    allocation: _containers.ScalarMap[str, float]
    received: _containers.ScalarMap[str, float]
    arrival_s: float
    completion_s: float
    mixed: bool
    min_scale_factor: int
    gpus: int
    entity: str
    started_s: float
    ended_s: float
    steps_per_s: _containers.ScalarMap[str, float]
    priority_weight: float
    startup_s: float
    user: str
    array_id: str
    array_index: int
    max_runtime_s: float
    after: _containers.RepeatedScalarFieldContainer[str]
    run_s: float
    eta_start_s: float
    eta_finish_s: float
    run_began_s: float
    run_up_s: float
    run_refill: bool
    run_ending: bool
    run_lease_steps: int
    period_x: _containers.ScalarMap[str, float]
    period_received_s: _containers.ScalarMap[str, float]
    period_deficit_s: _containers.ScalarMap[str, float]
    run_next_type: str
    restart_s: float
    run_reported_s: float
    plan_steps_per_s: _containers.ScalarMap[str, float]
    exit_s: float
    startup_alone_s: float
    shared_with: str
    period_isolated: _containers.RepeatedScalarFieldContainer[float]
    slo_s: float
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., steps_done: _Optional[int] = ..., total_steps: _Optional[int] = ..., job_type: _Optional[str] = ..., scale_factor: _Optional[int] = ..., worker_type: _Optional[str] = ..., reason: _Optional[str] = ..., allocation: _Optional[_Mapping[str, float]] = ..., received: _Optional[_Mapping[str, float]] = ..., arrival_s: _Optional[float] = ..., completion_s: _Optional[float] = ..., mixed: _Optional[bool] = ..., min_scale_factor: _Optional[int] = ..., gpus: _Optional[int] = ..., entity: _Optional[str] = ..., started_s: _Optional[float] = ..., ended_s: _Optional[float] = ..., steps_per_s: _Optional[_Mapping[str, float]] = ..., priority_weight: _Optional[float] = ..., startup_s: _Optional[float] = ..., user: _Optional[str] = ..., array_id: _Optional[str] = ..., array_index: _Optional[int] = ..., max_runtime_s: _Optional[float] = ..., after: _Optional[_Iterable[str]] = ..., run_s: _Optional[float] = ..., eta_start_s: _Optional[float] = ..., eta_finish_s: _Optional[float] = ..., run_began_s: _Optional[float] = ..., run_up_s: _Optional[float] = ..., run_refill: _Optional[bool] = ..., run_ending: _Optional[bool] = ..., run_lease_steps: _Optional[int] = ..., period_x: _Optional[_Mapping[str, float]] = ..., period_received_s: _Optional[_Mapping[str, float]] = ..., period_deficit_s: _Optional[_Mapping[str, float]] = ..., run_next_type: _Optional[str] = ..., restart_s: _Optional[float] = ..., run_reported_s: _Optional[float] = ..., plan_steps_per_s: _Optional[_Mapping[str, float]] = ..., exit_s: _Optional[float] = ..., startup_alone_s: _Optional[float] = ..., shared_with: _Optional[str] = ..., period_isolated: _Optional[_Iterable[float]] = ..., slo_s: _Optional[float] = ...) -> None: ...

class EntityStatus(_message.Message):
    __slots__ = ("name", "weight", "policy", "max_gpus", "gpus", "jobs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_GPUS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: float
    policy: str
    max_gpus: int
    gpus: int
    jobs: int
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[float] = ..., policy: _Optional[str] = ..., max_gpus: _Optional[int] = ..., gpus: _Optional[int] = ..., jobs: _Optional[int] = ...) -> None: ...

class WorkerStatus(_message.Message):
    __slots__ = ("id", "type", "gpus", "alive", "address", "drained", "runs")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DRAINED_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    gpus: int
    alive: bool
    address: str
    drained: bool
    runs: int
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., gpus: _Optional[int] = ..., alive: _Optional[bool] = ..., address: _Optional[str] = ..., drained: _Optional[bool] = ..., runs: _Optional[int] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("round", "jobs", "workers", "policy", "round_seconds", "now_s", "epoch_unix", "resolve", "min_resolve_interval_s", "round_ends_s", "refill_until", "plan_lead_s", "entities", "caller", "eta_computed_s", "eta_error", "period_start_s", "period_stale", "restart_rule", "policy_options", "startup_wave_slope", "pair_table", "type_order", "period_pairs", "period_policy_state", "measured_pairs", "pair_partners", "solving_since_s", "solving_jobs", "allocation_solve_s", "prices", "price_changes", "notices")
    class PricesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class PriceChangesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PriceChanges
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PriceChanges, _Mapping]] = ...) -> None: ...
    ROUND_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    ROUND_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NOW_S_FIELD_NUMBER: _ClassVar[int]
    EPOCH_UNIX_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_FIELD_NUMBER: _ClassVar[int]
    MIN_RESOLVE_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    ROUND_ENDS_S_FIELD_NUMBER: _ClassVar[int]
    REFILL_UNTIL_FIELD_NUMBER: _ClassVar[int]
    PLAN_LEAD_S_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    ETA_COMPUTED_S_FIELD_NUMBER: _ClassVar[int]
    ETA_ERROR_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_S_FIELD_NUMBER: _ClassVar[int]
    PERIOD_STALE_FIELD_NUMBER: _ClassVar[int]
    RESTART_RULE_FIELD_NUMBER: _ClassVar[int]
    POLICY_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    STARTUP_WAVE_SLOPE_FIELD_NUMBER: _ClassVar[int]
    PAIR_TABLE_FIELD_NUMBER: _ClassVar[int]
    TYPE_ORDER_FIELD_NUMBER: _ClassVar[int]
    PERIOD_PAIRS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_POLICY_STATE_FIELD_NUMBER: _ClassVar[int]
    MEASURED_PAIRS_FIELD_NUMBER: _ClassVar[int]
    PAIR_PARTNERS_FIELD_NUMBER: _ClassVar[int]
    SOLVING_SINCE_S_FIELD_NUMBER: _ClassVar[int]
    SOLVING_JOBS_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_SOLVE_S_FIELD_NUMBER: _ClassVar[int]
    PRICES_FIELD_NUMBER: _ClassVar[int]
    PRICE_CHANGES_FIELD_NUMBER: _ClassVar[int]
    NOTICES_FIELD_NUMBER: _ClassVar[int]
    round: int
    jobs: _containers.RepeatedCompositeFieldContainer[JobStatus]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerStatus]
    policy: str
    round_seconds: float
    now_s: float
    epoch_unix: float
    resolve: str
    min_resolve_interval_s: float
    round_ends_s: float
    refill_until: float
    plan_lead_s: float
    entities: _containers.RepeatedCompositeFieldContainer[EntityStatus]
    caller: str
    eta_computed_s: float
    eta_error: str
    period_start_s: float
    period_stale: bool
    restart_rule: str
    policy_options: str
    startup_wave_slope: float
    pair_table: str
    type_order: _containers.RepeatedScalarFieldContainer[str]
    period_pairs: _containers.RepeatedCompositeFieldContainer[PeriodPair]
    period_policy_state: str
    measured_pairs: _containers.RepeatedCompositeFieldContainer[PairRates]
    pair_partners: int
    solving_since_s: float
    solving_jobs: int
    allocation_solve_s: float
    prices: _containers.ScalarMap[str, float]
    price_changes: _containers.MessageMap[str, PriceChanges]
    notices: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, round: _Optional[int] = ..., jobs: _Optional[_Iterable[_Union[JobStatus, _Mapping]]] = ..., workers: _Optional[_Iterable[_Union[WorkerStatus, _Mapping]]] = ..., policy: _Optional[str] = ..., round_seconds: _Optional[float] = ..., now_s: _Optional[float] = ..., epoch_unix: _Optional[float] = ..., resolve: _Optional[str] = ..., min_resolve_interval_s: _Optional[float] = ..., round_ends_s: _Optional[float] = ..., refill_until: _Optional[float] = ..., plan_lead_s: _Optional[float] = ..., entities: _Optional[_Iterable[_Union[EntityStatus, _Mapping]]] = ..., caller: _Optional[str] = ..., eta_computed_s: _Optional[float] = ..., eta_error: _Optional[str] = ..., period_start_s: _Optional[float] = ..., period_stale: _Optional[bool] = ..., restart_rule: _Optional[str] = ..., policy_options: _Optional[str] = ..., startup_wave_slope: _Optional[float] = ..., pair_table: _Optional[str] = ..., type_order: _Optional[_Iterable[str]] = ..., period_pairs: _Optional[_Iterable[_Union[PeriodPair, _Mapping]]] = ..., period_policy_state: _Optional[str] = ..., measured_pairs: _Optional[_Iterable[_Union[PairRates, _Mapping]]] = ..., pair_partners: _Optional[int] = ..., solving_since_s: _Optional[float] = ..., solving_jobs: _Optional[int] = ..., allocation_solve_s: _Optional[float] = ..., prices: _Optional[_Mapping[str, float]] = ..., price_changes: _Optional[_Mapping[str, PriceChanges]] = ..., notices: _Optional[_Iterable[str]] = ...) -> None: ...

class PriceChanges(_message.Message):
    __slots__ = ("at_s", "price")
    AT_S_FIELD_NUMBER: _ClassVar[int]
    PRICE_FIELD_NUMBER: _ClassVar[int]
    at_s: _containers.RepeatedScalarFieldContainer[float]
    price: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, at_s: _Optional[_Iterable[float]] = ..., price: _Optional[_Iterable[float]] = ...) -> None: ...

class PairRates(_message.Message):
    __slots__ = ("a", "b", "a_steps_per_s", "b_steps_per_s")
    class AStepsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class BStepsPerSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    A_STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    B_STEPS_PER_S_FIELD_NUMBER: _ClassVar[int]
    a: str
    b: str
    a_steps_per_s: _containers.ScalarMap[str, float]
    b_steps_per_s: _containers.ScalarMap[str, float]
    def __init__(self, a: _Optional[str] = ..., b: _Optional[str] = ..., a_steps_per_s: _Optional[_Mapping[str, float]] = ..., b_steps_per_s: _Optional[_Mapping[str, float]] = ...) -> None: ...

class PeriodPair(_message.Message):
    __slots__ = ("a", "b", "x", "received_s", "deficit_s")
    class XEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ReceivedSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class DeficitSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_S_FIELD_NUMBER: _ClassVar[int]
    DEFICIT_S_FIELD_NUMBER: _ClassVar[int]
    a: str
    b: str
    x: _containers.ScalarMap[str, float]
    received_s: _containers.ScalarMap[str, float]
    deficit_s: _containers.ScalarMap[str, float]
    def __init__(self, a: _Optional[str] = ..., b: _Optional[str] = ..., x: _Optional[_Mapping[str, float]] = ..., received_s: _Optional[_Mapping[str, float]] = ..., deficit_s: _Optional[_Mapping[str, float]] = ...) -> None: ...

class DrainRequest(_message.Message):
    __slots__ = ("server_id", "undo")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    UNDO_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    undo: bool
    def __init__(self, server_id: _Optional[int] = ..., undo: _Optional[bool] = ...) -> None: ...

class DrainResponse(_message.Message):
    __slots__ = ("drained", "runs", "message")
    DRAINED_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    drained: bool
    runs: int
    message: str
    def __init__(self, drained: _Optional[bool] = ..., runs: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class LogsRequest(_message.Message):
    __slots__ = ("job_id", "follow", "ranks", "stream")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    follow: bool
    ranks: _containers.RepeatedScalarFieldContainer[int]
    stream: str
    def __init__(self, job_id: _Optional[str] = ..., follow: _Optional[bool] = ..., ranks: _Optional[_Iterable[int]] = ..., stream: _Optional[str] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("file", "server_id", "host", "offset", "data", "error")
    FILE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    file: LogFile
    server_id: int
    host: str
    offset: int
    data: bytes
    error: str
    def __init__(self, file: _Optional[_Union[LogFile, _Mapping]] = ..., server_id: _Optional[int] = ..., host: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., error: _Optional[str] = ...) -> None: ...
