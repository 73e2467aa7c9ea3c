"""The JetStream API error table, as data.

Every entry of nats-server's ``server/errors.json`` (the source ``jetstream_errors_generated.go``
is generated from) with the same three values clients see on the wire::

    {"code": 404, "err_code": 10059, "description": "stream not found"}

``code`` is HTTP-like, ``err_code`` is the number clients branch on (nats.go, nats-py and the
nats CLI all switch on it) and ``description`` keeps nats-server's ``{placeholder}`` templates
(``"wrong last sequence: {seq}"``). The numbers and texts were copied from errors.json and
checked against the strings in the nats-server 2.15.1 binary and its responses (see
``tests/jetstream/test_errors.py``).

Each constant is an :class:`ErrorDef`; calling it makes the :class:`ApiError` to raise::

    raise JSStreamNotFoundErr()
    raise JSStreamWrongLastSequenceErrF(seq=41)
    raise JSStreamInvalidConfigF(err="max age needs to be >= 100ms")
    raise err("JSStreamNotFoundErr")          # by name, as the API handlers do

Like nats-server's ``NewJS...Error(args)``, placeholders are replaced with ``str(value)``;
a placeholder without a value is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "API_ERRORS",
    "BY_ERR_CODE",
    "ApiError",
    "ErrorDef",
    "err",
    "format_description",
    "lookup",
]


def format_description(template: str, **args: Any) -> str:
    """Fill nats-server ``{name}`` placeholders; unknown placeholders stay untouched."""
    out = template
    for key, value in args.items():
        out = out.replace("{" + key + "}", str(value))
    return out


class ApiError(Exception):
    """A JetStream API error as sent in the ``error`` field of an API response."""

    __slots__ = ("code", "description", "err_code")

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}

    def is_(self, definition: ErrorDef) -> bool:
        """True when this error is an instance of ``definition`` (same ``err_code``)."""
        return self.err_code == definition.err_code

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ApiError):
            return NotImplemented
        return (self.code, self.err_code, self.description) == (
            other.code,
            other.err_code,
            other.description,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.err_code, self.description))

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.err_code}, {self.description!r})"


@dataclass(frozen=True, slots=True)
class ErrorDef:
    """One row of errors.json: call it to get an :class:`ApiError`."""

    constant: str
    code: int
    err_code: int
    description: str
    deprecates: str = ""

    def __call__(self, **args: Any) -> ApiError:
        return ApiError(self.code, self.err_code, format_description(self.description, **args))

    def matches(self, error: BaseException) -> bool:
        return isinstance(error, ApiError) and error.err_code == self.err_code


# (constant, code, err_code, description[, deprecates]) in errors.json order.
_TABLE: tuple[tuple[Any, ...], ...] = (
    ("JSClusterPeerNotMemberErr", 400, 10040, "peer not a member"),
    (
        "JSConsumerEphemeralWithDurableInSubjectErr",
        400,
        10019,
        "consumer expected to be ephemeral but detected a durable name set in subject",
    ),
    (
        "JSStreamExternalDelPrefixOverlapsErrF",
        400,
        10022,
        "stream external delivery prefix {prefix} overlaps with stream subject {subject}",
    ),
    ("JSAccountResourcesExceededErr", 400, 10002, "resource limits exceeded for account"),
    ("JSClusterNotAvailErr", 503, 10008, "JetStream system temporarily unavailable"),
    ("JSStreamSubjectOverlapErr", 400, 10065, "subjects overlap with an existing stream"),
    ("JSStreamWrongLastSequenceErrF", 400, 10071, "wrong last sequence: {seq}"),
    (
        "JSTemplateNameNotMatchSubjectErr",
        400,
        10073,
        "template name in subject does not match request",
    ),
    ("JSClusterNoPeersErrF", 400, 10005, "{err}"),
    (
        "JSConsumerEphemeralWithDurableNameErr",
        400,
        10020,
        "consumer expected to be ephemeral but a durable name was set in request",
    ),
    (
        "JSInsufficientResourcesErr",
        503,
        10023,
        "insufficient resources",
        "ErrJetStreamResourcesExceeded",
    ),
    (
        "JSMirrorMaxMessageSizeTooBigErr",
        400,
        10030,
        "stream mirror must have max message size >= source",
    ),
    ("JSStreamTemplateDeleteErrF", 500, 10067, "{err}"),
    ("JSBadRequestErr", 400, 10003, "bad request"),
    ("JSClusterUnSupportFeatureErr", 503, 10036, "not currently supported in clustered mode"),
    ("JSConsumerNotFoundErr", 404, 10014, "consumer not found"),
    (
        "JSSourceMaxMessageSizeTooBigErr",
        400,
        10046,
        "stream source must have max message size >= target",
    ),
    ("JSStreamAssignmentErrF", 500, 10048, "{err}"),
    ("JSStreamMessageExceedsMaximumErr", 400, 10054, "message size exceeds maximum allowed"),
    ("JSStreamTemplateCreateErrF", 500, 10066, "{err}"),
    ("JSInvalidJSONErr", 400, 10025, "invalid JSON: {err}"),
    (
        "JSStreamInvalidExternalDeliverySubjErrF",
        400,
        10024,
        "stream external delivery prefix {prefix} must not contain wildcards",
    ),
    ("JSStreamRestoreErrF", 500, 10062, "restore failed: {err}"),
    ("JSClusterIncompleteErr", 503, 10004, "incomplete results"),
    ("JSNoAccountErr", 503, 10035, "account not found"),
    ("JSRaftGeneralErrF", 500, 10041, "{err}"),
    (
        "JSRestoreSubscribeFailedErrF",
        500,
        10042,
        "JetStream unable to subscribe to restore snapshot {subject}: {err}",
    ),
    ("JSStreamDeleteErrF", 500, 10050, "{err}"),
    (
        "JSStreamExternalApiOverlapErrF",
        400,
        10021,
        "stream external api prefix {prefix} must not overlap with {subject}",
    ),
    ("JSMirrorWithSubjectsErr", 400, 10034, "stream mirrors can not contain subjects"),
    (
        "JSMirrorWithFirstSeqErr",
        400,
        10143,
        "stream mirrors can not have first sequence configured",
    ),
    ("JSNotEnabledErr", 503, 10076, "JetStream not enabled", "ErrJetStreamNotEnabled"),
    ("JSNotEnabledForAccountErr", 503, 10039, "JetStream not enabled for account"),
    ("JSSequenceNotFoundErrF", 400, 10043, "sequence {seq} not found"),
    (
        "JSStreamMirrorNotUpdatableErr",
        400,
        10055,
        "stream mirror configuration can not be updated",
    ),
    ("JSStreamSequenceNotMatchErr", 503, 10063, "expected stream sequence does not match"),
    ("JSStreamWrongLastMsgIDErrF", 400, 10070, "wrong last msg ID: {id}"),
    (
        "JSTempStorageFailedErr",
        500,
        10072,
        "JetStream unable to open temp storage for restore",
    ),
    (
        "JSStorageResourcesExceededErr",
        500,
        10047,
        "insufficient storage resources available",
        "ErrStorageResourcesExceeded",
    ),
    ("JSStreamMismatchErr", 400, 10056, "stream name in subject does not match request"),
    ("JSStreamNotMatchErr", 400, 10060, "expected stream does not match"),
    ("JSMirrorConsumerSetupFailedErrF", 500, 10029, "{err}"),
    ("JSNotEmptyRequestErr", 400, 10038, "expected an empty request payload"),
    (
        "JSStreamNameExistErr",
        400,
        10058,
        "stream name already in use with a different configuration",
        "ErrJetStreamStreamAlreadyUsed",
    ),
    ("JSClusterTagsErr", 400, 10011, "tags placement not supported for operation"),
    ("JSMaximumConsumersLimitErr", 400, 10026, "maximum consumers limit reached"),
    ("JSSourceConsumerSetupFailedErrF", 500, 10045, "{err}"),
    ("JSConsumerCreateErrF", 500, 10012, "{err}"),
    (
        "JSConsumerDurableNameNotInSubjectErr",
        400,
        10016,
        "consumer expected to be durable but no durable name set in subject",
    ),
    ("JSStreamLimitsErrF", 500, 10053, "{err}"),
    (
        "JSStreamReplicasNotUpdatableErr",
        400,
        10061,
        "Replicas configuration can not be updated",
    ),
    ("JSStreamTemplateNotFoundErr", 404, 10068, "template not found"),
    (
        "JSClusterNotAssignedErr",
        500,
        10007,
        "JetStream cluster not assigned to this server",
        "ErrJetStreamNotAssigned",
    ),
    (
        "JSClusterNotLeaderErr",
        500,
        10009,
        "JetStream cluster can not handle request",
        "ErrJetStreamNotLeader",
    ),
    (
        "JSConsumerNameExistErr",
        400,
        10013,
        "consumer name already in use",
        "ErrJetStreamConsumerAlreadyUsed",
    ),
    ("JSMirrorWithSourcesErr", 400, 10031, "stream mirrors can not also contain other sources"),
    ("JSStreamNotFoundErr", 404, 10059, "stream not found", "ErrJetStreamStreamNotFound"),
    ("JSClusterRequiredErr", 503, 10010, "JetStream clustering support required"),
    (
        "JSConsumerDurableNameNotSetErr",
        400,
        10018,
        "consumer expected to be durable but a durable name was not set",
    ),
    ("JSMaximumStreamsLimitErr", 400, 10027, "maximum number of streams reached"),
    (
        "JSMirrorWithStartSeqAndTimeErr",
        400,
        10032,
        "stream mirrors can not have both start seq and start time configured",
    ),
    ("JSStreamSnapshotErrF", 500, 10064, "snapshot failed: {err}"),
    ("JSStreamUpdateErrF", 500, 10069, "{err}"),
    (
        "JSClusterNotActiveErr",
        500,
        10006,
        "JetStream not in clustered mode",
        "ErrJetStreamNotClustered",
    ),
    (
        "JSConsumerDurableNameNotMatchSubjectErr",
        400,
        10017,
        "consumer name in subject does not match durable name in request",
    ),
    (
        "JSMemoryResourcesExceededErr",
        500,
        10028,
        "insufficient memory resources available",
        "ErrMemoryResourcesExceeded",
    ),
    (
        "JSMirrorWithSubjectFiltersErr",
        400,
        10033,
        "stream mirrors can not contain filtered subjects",
    ),
    ("JSStreamCreateErrF", 500, 10049, "{err}"),
    ("JSClusterServerNotMemberErr", 400, 10044, "server is not a member of the cluster"),
    ("JSNoMessageFoundErr", 404, 10037, "no message found"),
    ("JSSnapshotDeliverSubjectInvalidErr", 400, 10015, "deliver subject not valid"),
    ("JSStreamGeneralErrorF", 500, 10051, "{err}"),
    ("JSStreamInvalidConfigF", 500, 10052, "{err}"),
    (
        "JSStreamReplicasNotSupportedErr",
        500,
        10074,
        "replicas > 1 not supported in non-clustered mode",
        "ErrReplicasNotSupported",
    ),
    ("JSStreamMsgDeleteFailedF", 500, 10057, "{err}"),
    ("JSPeerRemapErr", 503, 10075, "peer remap failed"),
    ("JSStreamStoreFailedF", 503, 10077, "{err}"),
    ("JSConsumerConfigRequiredErr", 400, 10078, "consumer config required"),
    ("JSConsumerDeliverToWildcardsErr", 400, 10079, "consumer deliver subject has wildcards"),
    ("JSConsumerPushMaxWaitingErr", 400, 10080, "consumer in push mode can not set max waiting"),
    ("JSConsumerDeliverCycleErr", 400, 10081, "consumer deliver subject forms a cycle"),
    (
        "JSConsumerMaxPendingAckPolicyRequiredErr",
        400,
        10082,
        "consumer requires ack policy for max ack pending",
    ),
    ("JSConsumerSmallHeartbeatErr", 400, 10083, "consumer idle heartbeat needs to be >= 100ms"),
    (
        "JSConsumerPullRequiresAckErr",
        400,
        10084,
        "consumer in pull mode requires explicit ack policy on workqueue stream",
    ),
    ("JSConsumerPullNotDurableErr", 400, 10085, "consumer in pull mode requires a durable name"),
    (
        "JSConsumerPullWithRateLimitErr",
        400,
        10086,
        "consumer in pull mode can not have rate limit set",
    ),
    ("JSConsumerMaxWaitingNegativeErr", 400, 10087, "consumer max waiting needs to be positive"),
    (
        "JSConsumerHBRequiresPushErr",
        400,
        10088,
        "consumer idle heartbeat requires a push based consumer",
    ),
    (
        "JSConsumerFCRequiresPushErr",
        400,
        10089,
        "consumer flow control requires a push based consumer",
    ),
    (
        "JSConsumerDirectRequiresPushErr",
        400,
        10090,
        "consumer direct requires a push based consumer",
    ),
    (
        "JSConsumerDirectRequiresEphemeralErr",
        400,
        10091,
        "consumer direct requires an ephemeral consumer",
    ),
    ("JSConsumerOnMappedErr", 400, 10092, "consumer direct on a mapped consumer"),
    (
        "JSConsumerFilterNotSubsetErr",
        400,
        10093,
        "consumer filter subject is not a valid subset of the interest subjects",
    ),
    ("JSConsumerInvalidPolicyErrF", 400, 10094, "{err}"),
    (
        "JSConsumerInvalidSamplingErrF",
        400,
        10095,
        "failed to parse consumer sampling configuration: {err}",
    ),
    ("JSStreamInvalidErr", 500, 10096, "stream not valid"),
    ("JSConsumerWQRequiresExplicitAckErr", 400, 10098, "workqueue stream requires explicit ack"),
    (
        "JSConsumerWQMultipleUnfilteredErr",
        400,
        10099,
        "multiple non-filtered consumers not allowed on workqueue stream",
    ),
    (
        "JSConsumerWQConsumerNotUniqueErr",
        400,
        10100,
        "filtered consumer not unique on workqueue stream",
    ),
    (
        "JSConsumerWQConsumerNotDeliverAllErr",
        400,
        10101,
        "consumer must be deliver all on workqueue stream",
    ),
    (
        "JSConsumerNameTooLongErrF",
        400,
        10102,
        "consumer name is too long, maximum allowed is {max}",
    ),
    ("JSConsumerBadDurableNameErr", 400, 10103, "durable name can not contain '.', '*', '>'"),
    ("JSConsumerStoreFailedErrF", 500, 10104, "error creating store for consumer: {err}"),
    ("JSConsumerExistingActiveErr", 400, 10105, "consumer already exists and is still active"),
    (
        "JSConsumerReplacementWithDifferentNameErr",
        400,
        10106,
        "consumer replacement durable config not the same",
    ),
    (
        "JSConsumerDescriptionTooLongErrF",
        400,
        10107,
        "consumer description is too long, maximum allowed is {max}",
    ),
    (
        "JSStreamHeaderExceedsMaximumErr",
        400,
        10097,
        "header size exceeds maximum allowed of 64k",
    ),
    (
        "JSConsumerWithFlowControlNeedsHeartbeats",
        400,
        10108,
        "consumer with flow control also needs heartbeats",
    ),
    ("JSStreamSealedErr", 400, 10109, "invalid operation on sealed stream"),
    ("JSStreamPurgeFailedF", 500, 10110, "{err}"),
    ("JSStreamRollupFailedF", 500, 10111, "{err}"),
    ("JSConsumerInvalidDeliverSubject", 400, 10112, "invalid push consumer deliver subject"),
    (
        "JSStreamMaxBytesRequired",
        400,
        10113,
        "account requires a stream config to have max bytes set",
    ),
    (
        "JSConsumerMaxRequestBatchNegativeErr",
        400,
        10114,
        "consumer max request batch needs to be > 0",
    ),
    (
        "JSConsumerMaxRequestExpiresTooSmall",
        400,
        10115,
        "consumer max request expires needs to be >= 1ms",
    ),
    (
        "JSConsumerMaxDeliverBackoffErr",
        400,
        10116,
        "max deliver is required to be > length of backoff values",
    ),
    ("JSStreamInfoMaxSubjectsErr", 500, 10117, "subject details would exceed maximum allowed"),
    ("JSStreamOfflineErr", 500, 10118, "stream is offline"),
    ("JSConsumerOfflineErr", 500, 10119, "consumer is offline"),
    ("JSNoLimitsErr", 400, 10120, "no JetStream default or applicable tiered limit present"),
    (
        "JSConsumerMaxPendingAckExcessErrF",
        400,
        10121,
        "consumer max ack pending exceeds system limit of {limit}",
    ),
    (
        "JSStreamMaxStreamBytesExceeded",
        400,
        10122,
        "stream max bytes exceeds account limit max stream bytes",
    ),
    (
        "JSStreamMoveAndScaleErr",
        400,
        10123,
        "can not move and scale a stream in a single update",
    ),
    ("JSStreamMoveInProgressErr", 400, 10124, "stream move already in progress"),
    (
        "JSConsumerMaxRequestBatchExceededF",
        400,
        10125,
        "consumer max request batch exceeds server limit of {limit}",
    ),
    (
        "JSConsumerReplicasExceedsStream",
        400,
        10126,
        "consumer config replica count exceeds parent stream",
    ),
    (
        "JSConsumerNameContainsPathSeparatorsErr",
        400,
        10127,
        "Consumer name can not contain path separators",
    ),
    (
        "JSStreamNameContainsPathSeparatorsErr",
        400,
        10128,
        "Stream name can not contain path separators",
    ),
    (
        "JSStreamReconfigureNotInProgressErr",
        400,
        10129,
        "stream reconfiguration not in progress",
    ),
    (
        "JSStreamNameExistRestoreFailedErr",
        400,
        10130,
        "stream name already in use, cannot restore",
    ),
    (
        "JSConsumerCreateFilterSubjectMismatchErr",
        400,
        10131,
        "Consumer create request did not match filtered subject from create subject",
    ),
    (
        "JSConsumerCreateDurableAndNameMismatch",
        400,
        10132,
        "Consumer Durable and Name have to be equal if both are provided",
    ),
    ("JSReplicasCountCannotBeNegative", 400, 10133, "replicas count cannot be negative"),
    (
        "JSConsumerReplicasShouldMatchStream",
        400,
        10134,
        "consumer config replicas must match interest retention stream's replicas",
    ),
    (
        "JSConsumerMetadataLengthErrF",
        400,
        10135,
        "consumer metadata exceeds maximum size of {limit}",
    ),
    (
        "JSConsumerDuplicateFilterSubjects",
        400,
        10136,
        "consumer cannot have both FilterSubject and FilterSubjects specified",
    ),
    (
        "JSConsumerMultipleFiltersNotAllowed",
        400,
        10137,
        "consumer with multiple subject filters cannot use subject based API",
    ),
    (
        "JSConsumerOverlappingSubjectFilters",
        400,
        10138,
        "consumer subject filters cannot overlap",
    ),
    ("JSConsumerEmptyFilter", 400, 10139, "consumer filter in FilterSubjects cannot be empty"),
    ("JSSourceDuplicateDetected", 400, 10140, "duplicate source configuration detected"),
    ("JSSourceInvalidStreamName", 400, 10141, "sourced stream name is invalid"),
    ("JSMirrorInvalidStreamName", 400, 10142, "mirrored stream name is invalid"),
    (
        "JSSourceMultipleFiltersNotAllowed",
        400,
        10144,
        "source with multiple subject transforms cannot also have a single subject filter",
    ),
    ("JSSourceInvalidSubjectFilter", 400, 10145, "source transform source: {err}"),
    ("JSSourceInvalidTransformDestination", 400, 10146, "source transform: {err}"),
    ("JSSourceOverlappingSubjectFilters", 400, 10147, "source filters can not overlap"),
    ("JSConsumerAlreadyExists", 400, 10148, "consumer already exists"),
    ("JSConsumerDoesNotExist", 400, 10149, "consumer does not exist"),
    (
        "JSMirrorMultipleFiltersNotAllowed",
        400,
        10150,
        "mirror with multiple subject transforms cannot also have a single subject filter",
    ),
    ("JSMirrorInvalidSubjectFilter", 400, 10151, "mirror transform source: {err}"),
    ("JSMirrorOverlappingSubjectFilters", 400, 10152, "mirror subject filters can not overlap"),
    (
        "JSConsumerInactiveThresholdExcess",
        400,
        10153,
        "consumer inactive threshold exceeds system limit of {limit}",
    ),
    ("JSMirrorInvalidTransformDestination", 400, 10154, "mirror transform: {err}"),
    ("JSStreamTransformInvalidSource", 400, 10155, "stream transform source: {err}"),
    ("JSStreamTransformInvalidDestination", 400, 10156, "stream transform: {err}"),
    ("JSPedanticErrF", 400, 10157, "pedantic mode: {err}"),
    ("JSStreamDuplicateMessageConflict", 409, 10158, "duplicate message id is in process"),
    (
        "JSConsumerPriorityPolicyWithoutGroup",
        400,
        10159,
        "Setting PriorityPolicy requires at least one PriorityGroup to be set",
    ),
    (
        "JSConsumerInvalidPriorityGroupErr",
        400,
        10160,
        "Provided priority group does not exist for this consumer",
    ),
    ("JSConsumerEmptyGroupName", 400, 10161, "Group name cannot be an empty string"),
    (
        "JSConsumerInvalidGroupNameErr",
        400,
        10162,
        "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16"
        " characters",
    ),
    (
        "JSStreamExpectedLastSeqPerSubjectNotReady",
        503,
        10163,
        "expected last sequence per subject temporarily unavailable",
    ),
    ("JSStreamWrongLastSequenceConstantErr", 400, 10164, "wrong last sequence"),
    ("JSMessageTTLInvalidErr", 400, 10165, "invalid per-message TTL"),
    ("JSMessageTTLDisabledErr", 400, 10166, "per-message TTL is disabled"),
    ("JSStreamTooManyRequests", 429, 10167, "too many requests"),
    ("JSMessageIncrDisabledErr", 400, 10168, "message counters is disabled"),
    ("JSMessageIncrMissingErr", 400, 10169, "message counter increment is missing"),
    ("JSMessageIncrPayloadErr", 400, 10170, "message counter has payload"),
    ("JSMessageIncrInvalidErr", 400, 10171, "message counter increment is invalid"),
    ("JSMessageCounterBrokenErr", 400, 10172, "message counter is broken"),
    ("JSMirrorWithCountersErr", 400, 10173, "stream mirrors can not also calculate counters"),
    ("JSAtomicPublishDisabledErr", 400, 10174, "atomic publish is disabled"),
    ("JSAtomicPublishMissingSeqErr", 400, 10175, "atomic publish sequence is missing"),
    ("JSAtomicPublishIncompleteBatchErr", 400, 10176, "atomic publish batch is incomplete"),
    (
        "JSAtomicPublishUnsupportedHeaderBatchErr",
        400,
        10177,
        "atomic publish unsupported header used: {header}",
    ),
    (
        "JSConsumerPushWithPriorityGroupErr",
        400,
        10178,
        "priority groups can not be used with push consumers",
    ),
    ("JSAtomicPublishInvalidBatchIDErr", 400, 10179, "atomic publish batch ID is invalid"),
    ("JSStreamMinLastSeqErr", 412, 10180, "min last sequence"),
    ("JSConsumerAckPolicyInvalidErr", 400, 10181, "consumer ack policy invalid"),
    ("JSConsumerReplayPolicyInvalidErr", 400, 10182, "consumer replay policy invalid"),
    ("JSConsumerAckWaitNegativeErr", 400, 10183, "consumer ack wait needs to be positive"),
    ("JSConsumerBackOffNegativeErr", 400, 10184, "consumer backoff needs to be positive"),
    ("JSRequiredApiLevelErr", 412, 10185, "JetStream minimum api level required"),
    ("JSMirrorWithMsgSchedulesErr", 400, 10186, "stream mirrors can not also schedule messages"),
    ("JSSourceWithMsgSchedulesErr", 400, 10187, "stream source can not also schedule messages"),
    ("JSMessageSchedulesDisabledErr", 400, 10188, "message schedules is disabled"),
    (
        "JSMessageSchedulesPatternInvalidErr",
        400,
        10189,
        "message schedules pattern is invalid",
    ),
    ("JSMessageSchedulesTargetInvalidErr", 400, 10190, "message schedules target is invalid"),
    (
        "JSMessageSchedulesTTLInvalidErr",
        400,
        10191,
        "message schedules invalid per-message TTL",
    ),
    ("JSMessageSchedulesRollupInvalidErr", 400, 10192, "message schedules invalid rollup"),
    (
        "JSStreamExpectedLastSeqPerSubjectInvalid",
        400,
        10193,
        "missing sequence for expected last sequence per subject",
    ),
    ("JSStreamOfflineReasonErrF", 500, 10194, "stream is offline: {err}"),
    ("JSConsumerOfflineReasonErrF", 500, 10195, "consumer is offline: {err}"),
    (
        "JSConsumerPriorityGroupWithPolicyNone",
        400,
        10196,
        "consumer can not have priority groups when policy is none",
    ),
    (
        "JSConsumerPinnedTTLWithoutPriorityPolicyNone",
        400,
        10197,
        "PinnedTTL cannot be set when PriorityPolicy is none",
    ),
    (
        "JSMirrorWithAtomicPublishErr",
        400,
        10198,
        "stream mirrors can not also use atomic publishing",
    ),
    ("JSAtomicPublishTooLargeBatchErrF", 400, 10199, "atomic publish batch is too large: {size}"),
    (
        "JSAtomicPublishInvalidBatchCommitErr",
        400,
        10200,
        "atomic publish batch commit is invalid",
    ),
    (
        "JSAtomicPublishContainsDuplicateMessageErr",
        400,
        10201,
        "atomic publish batch contains duplicate message id",
    ),
    (
        "JSClusterServerMemberChangeInflightErr",
        400,
        10202,
        "cluster member change is in progress",
    ),
    ("JSMessageSchedulesSourceInvalidErr", 400, 10203, "message schedules source is invalid"),
    ("JSConsumerInvalidResetErr", 400, 10204, "invalid reset: {err}"),
    ("JSBatchPublishDisabledErr", 400, 10205, "batch publish is disabled"),
    ("JSBatchPublishInvalidPatternErr", 400, 10206, "batch publish pattern is invalid"),
    ("JSBatchPublishInvalidBatchIDErr", 400, 10207, "batch publish ID is invalid"),
    ("JSBatchPublishUnknownBatchIDErr", 400, 10208, "batch publish ID unknown"),
    (
        "JSMirrorWithBatchPublishErr",
        400,
        10209,
        "stream mirrors can not also use batch publishing",
    ),
    ("JSAtomicPublishTooManyInflight", 429, 10210, "atomic publish too many inflight"),
    ("JSBatchPublishTooManyInflight", 429, 10211, "batch publish too many inflight"),
    (
        "JSMessageSchedulesSchedulerInvalidErr",
        400,
        10212,
        "message schedules invalid scheduler",
    ),
    (
        "JSMirrorDurableConsumerCfgInvalid",
        400,
        10213,
        "stream mirror consumer config is invalid",
    ),
    (
        "JSMirrorConsumerRequiresAckFCErr",
        400,
        10214,
        "stream mirror consumer requires flow control ack policy",
    ),
    (
        "JSSourceDurableConsumerCfgInvalid",
        400,
        10215,
        "stream source consumer config is invalid",
    ),
    (
        "JSSourceDurableConsumerDuplicateDetected",
        400,
        10216,
        "duplicate stream source consumer detected",
    ),
    (
        "JSSourceConsumerRequiresAckFCErr",
        400,
        10217,
        "stream source consumer requires flow control ack policy",
    ),
    (
        "JSConsumerAckFCRequiresPushErr",
        400,
        10218,
        "flow control ack policy requires a push based consumer",
    ),
    (
        "JSConsumerAckFCRequiresFCErr",
        400,
        10219,
        "flow control ack policy requires flow control",
    ),
    (
        "JSConsumerAckFCRequiresMaxAckPendingErr",
        400,
        10220,
        "flow control ack policy requires max ack pending",
    ),
    (
        "JSConsumerAckFCRequiresNoAckWaitErr",
        400,
        10221,
        "flow control ack policy requires unset ack wait",
    ),
    (
        "JSConsumerAckFCRequiresNoMaxDeliverErr",
        400,
        10222,
        "flow control ack policy requires unset max deliver",
    ),
    (
        "JSMessageSchedulesTimeZoneInvalidErr",
        400,
        10223,
        "message schedules time zone is invalid",
    ),
    ("JSClusterRescueErr", 400, 10224, "JetStream system rescue not applied: {err}"),
    (
        "JSConsumerStreamIdentityMismatchF",
        400,
        10225,
        "consumer's stream identity does not match: {msg}",
    ),
    (
        "JSStreamReconfigureInProgressErr",
        400,
        10226,
        "stream reconfiguration already in progress",
    ),
    (
        "JSMessageSourceHdrNotAllowedErr",
        400,
        10227,
        "message stream source header is not allowed",
    ),
)


def _build() -> dict[str, ErrorDef]:
    out: dict[str, ErrorDef] = {}
    for row in _TABLE:
        name, code, err_code, desc = row[0], row[1], row[2], row[3]
        dep = row[4] if len(row) > 4 else ""
        assert isinstance(name, str) and isinstance(desc, str) and isinstance(dep, str)
        assert isinstance(code, int) and isinstance(err_code, int)
        out[name] = ErrorDef(name, code, err_code, desc, dep)
    return out


API_ERRORS: dict[str, ErrorDef] = _build()
"""Every error by its nats-server constant name."""

BY_ERR_CODE: dict[int, ErrorDef] = {d.err_code: d for d in API_ERRORS.values()}
"""Every error by its ``err_code``."""


def lookup(name: str) -> ErrorDef:
    """The :class:`ErrorDef` called ``name``.

    Tolerates a missing or extra ``F`` suffix (nats-server marks templated errors with ``F``,
    e.g. ``JSStreamWrongLastSequenceErrF``), so ``lookup("JSStreamWrongLastSequenceErr")``
    works. Raises ``KeyError`` for an unknown name.
    """
    d = API_ERRORS.get(name)
    if d is None:
        d = API_ERRORS.get(name + "F")
    if d is None and name.endswith("F"):
        d = API_ERRORS.get(name[:-1])
    if d is None:
        raise KeyError(f"unknown JetStream API error {name!r}")
    return d


def err(name: str, **args: Any) -> ApiError:
    """``ApiError`` for the constant called ``name`` with its placeholders filled."""
    return lookup(name)(**args)


# The constants themselves, one module attribute per errors.json entry (JSStreamNotFoundErr,
# JSStreamInvalidConfigF, ...). Declared for type checkers, bound from the table below.
JSAccountResourcesExceededErr: ErrorDef
JSAtomicPublishContainsDuplicateMessageErr: ErrorDef
JSAtomicPublishDisabledErr: ErrorDef
JSAtomicPublishIncompleteBatchErr: ErrorDef
JSAtomicPublishInvalidBatchCommitErr: ErrorDef
JSAtomicPublishInvalidBatchIDErr: ErrorDef
JSAtomicPublishMissingSeqErr: ErrorDef
JSAtomicPublishTooLargeBatchErrF: ErrorDef
JSAtomicPublishTooManyInflight: ErrorDef
JSAtomicPublishUnsupportedHeaderBatchErr: ErrorDef
JSBadRequestErr: ErrorDef
JSBatchPublishDisabledErr: ErrorDef
JSBatchPublishInvalidBatchIDErr: ErrorDef
JSBatchPublishInvalidPatternErr: ErrorDef
JSBatchPublishTooManyInflight: ErrorDef
JSBatchPublishUnknownBatchIDErr: ErrorDef
JSClusterIncompleteErr: ErrorDef
JSClusterNoPeersErrF: ErrorDef
JSClusterNotActiveErr: ErrorDef
JSClusterNotAssignedErr: ErrorDef
JSClusterNotAvailErr: ErrorDef
JSClusterNotLeaderErr: ErrorDef
JSClusterPeerNotMemberErr: ErrorDef
JSClusterRequiredErr: ErrorDef
JSClusterRescueErr: ErrorDef
JSClusterServerMemberChangeInflightErr: ErrorDef
JSClusterServerNotMemberErr: ErrorDef
JSClusterTagsErr: ErrorDef
JSClusterUnSupportFeatureErr: ErrorDef
JSConsumerAckFCRequiresFCErr: ErrorDef
JSConsumerAckFCRequiresMaxAckPendingErr: ErrorDef
JSConsumerAckFCRequiresNoAckWaitErr: ErrorDef
JSConsumerAckFCRequiresNoMaxDeliverErr: ErrorDef
JSConsumerAckFCRequiresPushErr: ErrorDef
JSConsumerAckPolicyInvalidErr: ErrorDef
JSConsumerAckWaitNegativeErr: ErrorDef
JSConsumerAlreadyExists: ErrorDef
JSConsumerBackOffNegativeErr: ErrorDef
JSConsumerBadDurableNameErr: ErrorDef
JSConsumerConfigRequiredErr: ErrorDef
JSConsumerCreateDurableAndNameMismatch: ErrorDef
JSConsumerCreateErrF: ErrorDef
JSConsumerCreateFilterSubjectMismatchErr: ErrorDef
JSConsumerDeliverCycleErr: ErrorDef
JSConsumerDeliverToWildcardsErr: ErrorDef
JSConsumerDescriptionTooLongErrF: ErrorDef
JSConsumerDirectRequiresEphemeralErr: ErrorDef
JSConsumerDirectRequiresPushErr: ErrorDef
JSConsumerDoesNotExist: ErrorDef
JSConsumerDuplicateFilterSubjects: ErrorDef
JSConsumerDurableNameNotInSubjectErr: ErrorDef
JSConsumerDurableNameNotMatchSubjectErr: ErrorDef
JSConsumerDurableNameNotSetErr: ErrorDef
JSConsumerEmptyFilter: ErrorDef
JSConsumerEmptyGroupName: ErrorDef
JSConsumerEphemeralWithDurableInSubjectErr: ErrorDef
JSConsumerEphemeralWithDurableNameErr: ErrorDef
JSConsumerExistingActiveErr: ErrorDef
JSConsumerFCRequiresPushErr: ErrorDef
JSConsumerFilterNotSubsetErr: ErrorDef
JSConsumerHBRequiresPushErr: ErrorDef
JSConsumerInactiveThresholdExcess: ErrorDef
JSConsumerInvalidDeliverSubject: ErrorDef
JSConsumerInvalidGroupNameErr: ErrorDef
JSConsumerInvalidPolicyErrF: ErrorDef
JSConsumerInvalidPriorityGroupErr: ErrorDef
JSConsumerInvalidResetErr: ErrorDef
JSConsumerInvalidSamplingErrF: ErrorDef
JSConsumerMaxDeliverBackoffErr: ErrorDef
JSConsumerMaxPendingAckExcessErrF: ErrorDef
JSConsumerMaxPendingAckPolicyRequiredErr: ErrorDef
JSConsumerMaxRequestBatchExceededF: ErrorDef
JSConsumerMaxRequestBatchNegativeErr: ErrorDef
JSConsumerMaxRequestExpiresTooSmall: ErrorDef
JSConsumerMaxWaitingNegativeErr: ErrorDef
JSConsumerMetadataLengthErrF: ErrorDef
JSConsumerMultipleFiltersNotAllowed: ErrorDef
JSConsumerNameContainsPathSeparatorsErr: ErrorDef
JSConsumerNameExistErr: ErrorDef
JSConsumerNameTooLongErrF: ErrorDef
JSConsumerNotFoundErr: ErrorDef
JSConsumerOfflineErr: ErrorDef
JSConsumerOfflineReasonErrF: ErrorDef
JSConsumerOnMappedErr: ErrorDef
JSConsumerOverlappingSubjectFilters: ErrorDef
JSConsumerPinnedTTLWithoutPriorityPolicyNone: ErrorDef
JSConsumerPriorityGroupWithPolicyNone: ErrorDef
JSConsumerPriorityPolicyWithoutGroup: ErrorDef
JSConsumerPullNotDurableErr: ErrorDef
JSConsumerPullRequiresAckErr: ErrorDef
JSConsumerPullWithRateLimitErr: ErrorDef
JSConsumerPushMaxWaitingErr: ErrorDef
JSConsumerPushWithPriorityGroupErr: ErrorDef
JSConsumerReplacementWithDifferentNameErr: ErrorDef
JSConsumerReplayPolicyInvalidErr: ErrorDef
JSConsumerReplicasExceedsStream: ErrorDef
JSConsumerReplicasShouldMatchStream: ErrorDef
JSConsumerSmallHeartbeatErr: ErrorDef
JSConsumerStoreFailedErrF: ErrorDef
JSConsumerStreamIdentityMismatchF: ErrorDef
JSConsumerWQConsumerNotDeliverAllErr: ErrorDef
JSConsumerWQConsumerNotUniqueErr: ErrorDef
JSConsumerWQMultipleUnfilteredErr: ErrorDef
JSConsumerWQRequiresExplicitAckErr: ErrorDef
JSConsumerWithFlowControlNeedsHeartbeats: ErrorDef
JSInsufficientResourcesErr: ErrorDef
JSInvalidJSONErr: ErrorDef
JSMaximumConsumersLimitErr: ErrorDef
JSMaximumStreamsLimitErr: ErrorDef
JSMemoryResourcesExceededErr: ErrorDef
JSMessageCounterBrokenErr: ErrorDef
JSMessageIncrDisabledErr: ErrorDef
JSMessageIncrInvalidErr: ErrorDef
JSMessageIncrMissingErr: ErrorDef
JSMessageIncrPayloadErr: ErrorDef
JSMessageSchedulesDisabledErr: ErrorDef
JSMessageSchedulesPatternInvalidErr: ErrorDef
JSMessageSchedulesRollupInvalidErr: ErrorDef
JSMessageSchedulesSchedulerInvalidErr: ErrorDef
JSMessageSchedulesSourceInvalidErr: ErrorDef
JSMessageSchedulesTTLInvalidErr: ErrorDef
JSMessageSchedulesTargetInvalidErr: ErrorDef
JSMessageSchedulesTimeZoneInvalidErr: ErrorDef
JSMessageSourceHdrNotAllowedErr: ErrorDef
JSMessageTTLDisabledErr: ErrorDef
JSMessageTTLInvalidErr: ErrorDef
JSMirrorConsumerRequiresAckFCErr: ErrorDef
JSMirrorConsumerSetupFailedErrF: ErrorDef
JSMirrorDurableConsumerCfgInvalid: ErrorDef
JSMirrorInvalidStreamName: ErrorDef
JSMirrorInvalidSubjectFilter: ErrorDef
JSMirrorInvalidTransformDestination: ErrorDef
JSMirrorMaxMessageSizeTooBigErr: ErrorDef
JSMirrorMultipleFiltersNotAllowed: ErrorDef
JSMirrorOverlappingSubjectFilters: ErrorDef
JSMirrorWithAtomicPublishErr: ErrorDef
JSMirrorWithBatchPublishErr: ErrorDef
JSMirrorWithCountersErr: ErrorDef
JSMirrorWithFirstSeqErr: ErrorDef
JSMirrorWithMsgSchedulesErr: ErrorDef
JSMirrorWithSourcesErr: ErrorDef
JSMirrorWithStartSeqAndTimeErr: ErrorDef
JSMirrorWithSubjectFiltersErr: ErrorDef
JSMirrorWithSubjectsErr: ErrorDef
JSNoAccountErr: ErrorDef
JSNoLimitsErr: ErrorDef
JSNoMessageFoundErr: ErrorDef
JSNotEmptyRequestErr: ErrorDef
JSNotEnabledErr: ErrorDef
JSNotEnabledForAccountErr: ErrorDef
JSPedanticErrF: ErrorDef
JSPeerRemapErr: ErrorDef
JSRaftGeneralErrF: ErrorDef
JSReplicasCountCannotBeNegative: ErrorDef
JSRequiredApiLevelErr: ErrorDef
JSRestoreSubscribeFailedErrF: ErrorDef
JSSequenceNotFoundErrF: ErrorDef
JSSnapshotDeliverSubjectInvalidErr: ErrorDef
JSSourceConsumerRequiresAckFCErr: ErrorDef
JSSourceConsumerSetupFailedErrF: ErrorDef
JSSourceDuplicateDetected: ErrorDef
JSSourceDurableConsumerCfgInvalid: ErrorDef
JSSourceDurableConsumerDuplicateDetected: ErrorDef
JSSourceInvalidStreamName: ErrorDef
JSSourceInvalidSubjectFilter: ErrorDef
JSSourceInvalidTransformDestination: ErrorDef
JSSourceMaxMessageSizeTooBigErr: ErrorDef
JSSourceMultipleFiltersNotAllowed: ErrorDef
JSSourceOverlappingSubjectFilters: ErrorDef
JSSourceWithMsgSchedulesErr: ErrorDef
JSStorageResourcesExceededErr: ErrorDef
JSStreamAssignmentErrF: ErrorDef
JSStreamCreateErrF: ErrorDef
JSStreamDeleteErrF: ErrorDef
JSStreamDuplicateMessageConflict: ErrorDef
JSStreamExpectedLastSeqPerSubjectInvalid: ErrorDef
JSStreamExpectedLastSeqPerSubjectNotReady: ErrorDef
JSStreamExternalApiOverlapErrF: ErrorDef
JSStreamExternalDelPrefixOverlapsErrF: ErrorDef
JSStreamGeneralErrorF: ErrorDef
JSStreamHeaderExceedsMaximumErr: ErrorDef
JSStreamInfoMaxSubjectsErr: ErrorDef
JSStreamInvalidConfigF: ErrorDef
JSStreamInvalidErr: ErrorDef
JSStreamInvalidExternalDeliverySubjErrF: ErrorDef
JSStreamLimitsErrF: ErrorDef
JSStreamMaxBytesRequired: ErrorDef
JSStreamMaxStreamBytesExceeded: ErrorDef
JSStreamMessageExceedsMaximumErr: ErrorDef
JSStreamMinLastSeqErr: ErrorDef
JSStreamMirrorNotUpdatableErr: ErrorDef
JSStreamMismatchErr: ErrorDef
JSStreamMoveAndScaleErr: ErrorDef
JSStreamMoveInProgressErr: ErrorDef
JSStreamMsgDeleteFailedF: ErrorDef
JSStreamNameContainsPathSeparatorsErr: ErrorDef
JSStreamNameExistErr: ErrorDef
JSStreamNameExistRestoreFailedErr: ErrorDef
JSStreamNotFoundErr: ErrorDef
JSStreamNotMatchErr: ErrorDef
JSStreamOfflineErr: ErrorDef
JSStreamOfflineReasonErrF: ErrorDef
JSStreamPurgeFailedF: ErrorDef
JSStreamReconfigureInProgressErr: ErrorDef
JSStreamReconfigureNotInProgressErr: ErrorDef
JSStreamReplicasNotSupportedErr: ErrorDef
JSStreamReplicasNotUpdatableErr: ErrorDef
JSStreamRestoreErrF: ErrorDef
JSStreamRollupFailedF: ErrorDef
JSStreamSealedErr: ErrorDef
JSStreamSequenceNotMatchErr: ErrorDef
JSStreamSnapshotErrF: ErrorDef
JSStreamStoreFailedF: ErrorDef
JSStreamSubjectOverlapErr: ErrorDef
JSStreamTemplateCreateErrF: ErrorDef
JSStreamTemplateDeleteErrF: ErrorDef
JSStreamTemplateNotFoundErr: ErrorDef
JSStreamTooManyRequests: ErrorDef
JSStreamTransformInvalidDestination: ErrorDef
JSStreamTransformInvalidSource: ErrorDef
JSStreamUpdateErrF: ErrorDef
JSStreamWrongLastMsgIDErrF: ErrorDef
JSStreamWrongLastSequenceConstantErr: ErrorDef
JSStreamWrongLastSequenceErrF: ErrorDef
JSTempStorageFailedErr: ErrorDef
JSTemplateNameNotMatchSubjectErr: ErrorDef

globals().update(API_ERRORS)
__all__ += sorted(API_ERRORS)

# Spellings without nats-server's F suffix (the brief and some callers use them).
JSStreamWrongLastSequenceErr: ErrorDef = API_ERRORS["JSStreamWrongLastSequenceErrF"]
JSStreamWrongLastMsgIDErr: ErrorDef = API_ERRORS["JSStreamWrongLastMsgIDErrF"]
__all__ += ["JSStreamWrongLastMsgIDErr", "JSStreamWrongLastSequenceErr"]
