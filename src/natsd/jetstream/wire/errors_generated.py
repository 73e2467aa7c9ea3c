# Generated code, do not edit. See errors.json and run
# `.venv/bin/python tools/gen_jetstream_errors.py` to update.
# ruff: noqa: E501
"""nats-server's JetStream API errors: one typed constant per entry of errors.json.

errors.json is nats-server's ``server/errors.json`` (Apache-2.0, see NOTICE next to it). Each
constant is an :class:`~natsd.jetstream.wire.api_error.ErrorDef`; call it to get the ApiError to
raise (``JSStreamWrongLastSequenceErrF(seq=41)``). Import the constants through
``natsd.jetstream.wire.errors``.
"""

from __future__ import annotations

from typing import Final

from natsd.jetstream.wire.api_error import ErrorDef

__all__ = [
    "API_ERRORS",
    "BY_ERR_CODE",
    "JSAccountResourcesExceededErr",
    "JSAtomicPublishContainsDuplicateMessageErr",
    "JSAtomicPublishDisabledErr",
    "JSAtomicPublishIncompleteBatchErr",
    "JSAtomicPublishInvalidBatchCommitErr",
    "JSAtomicPublishInvalidBatchIDErr",
    "JSAtomicPublishMissingSeqErr",
    "JSAtomicPublishTooLargeBatchErrF",
    "JSAtomicPublishTooManyInflight",
    "JSAtomicPublishUnsupportedHeaderBatchErr",
    "JSBadRequestErr",
    "JSBatchPublishDisabledErr",
    "JSBatchPublishInvalidBatchIDErr",
    "JSBatchPublishInvalidPatternErr",
    "JSBatchPublishTooManyInflight",
    "JSBatchPublishUnknownBatchIDErr",
    "JSClusterIncompleteErr",
    "JSClusterNoPeersErrF",
    "JSClusterNotActiveErr",
    "JSClusterNotAssignedErr",
    "JSClusterNotAvailErr",
    "JSClusterNotLeaderErr",
    "JSClusterPeerNotMemberErr",
    "JSClusterRequiredErr",
    "JSClusterRescueErr",
    "JSClusterServerMemberChangeInflightErr",
    "JSClusterServerNotMemberErr",
    "JSClusterTagsErr",
    "JSClusterUnSupportFeatureErr",
    "JSConsumerAckFCRequiresFCErr",
    "JSConsumerAckFCRequiresMaxAckPendingErr",
    "JSConsumerAckFCRequiresNoAckWaitErr",
    "JSConsumerAckFCRequiresNoMaxDeliverErr",
    "JSConsumerAckFCRequiresPushErr",
    "JSConsumerAckPolicyInvalidErr",
    "JSConsumerAckWaitNegativeErr",
    "JSConsumerAlreadyExists",
    "JSConsumerBackOffNegativeErr",
    "JSConsumerBadDurableNameErr",
    "JSConsumerConfigRequiredErr",
    "JSConsumerCreateDurableAndNameMismatch",
    "JSConsumerCreateErrF",
    "JSConsumerCreateFilterSubjectMismatchErr",
    "JSConsumerDeliverCycleErr",
    "JSConsumerDeliverToWildcardsErr",
    "JSConsumerDescriptionTooLongErrF",
    "JSConsumerDirectRequiresEphemeralErr",
    "JSConsumerDirectRequiresPushErr",
    "JSConsumerDoesNotExist",
    "JSConsumerDuplicateFilterSubjects",
    "JSConsumerDurableNameNotInSubjectErr",
    "JSConsumerDurableNameNotMatchSubjectErr",
    "JSConsumerDurableNameNotSetErr",
    "JSConsumerEmptyFilter",
    "JSConsumerEmptyGroupName",
    "JSConsumerEphemeralWithDurableInSubjectErr",
    "JSConsumerEphemeralWithDurableNameErr",
    "JSConsumerExistingActiveErr",
    "JSConsumerFCRequiresPushErr",
    "JSConsumerFilterNotSubsetErr",
    "JSConsumerHBRequiresPushErr",
    "JSConsumerInactiveThresholdExcess",
    "JSConsumerInvalidDeliverSubject",
    "JSConsumerInvalidGroupNameErr",
    "JSConsumerInvalidPolicyErrF",
    "JSConsumerInvalidPriorityGroupErr",
    "JSConsumerInvalidResetErr",
    "JSConsumerInvalidSamplingErrF",
    "JSConsumerMaxDeliverBackoffErr",
    "JSConsumerMaxPendingAckExcessErrF",
    "JSConsumerMaxPendingAckPolicyRequiredErr",
    "JSConsumerMaxRequestBatchExceededF",
    "JSConsumerMaxRequestBatchNegativeErr",
    "JSConsumerMaxRequestExpiresTooSmall",
    "JSConsumerMaxWaitingNegativeErr",
    "JSConsumerMetadataLengthErrF",
    "JSConsumerMultipleFiltersNotAllowed",
    "JSConsumerNameContainsPathSeparatorsErr",
    "JSConsumerNameExistErr",
    "JSConsumerNameTooLongErrF",
    "JSConsumerNotFoundErr",
    "JSConsumerOfflineErr",
    "JSConsumerOfflineReasonErrF",
    "JSConsumerOnMappedErr",
    "JSConsumerOverlappingSubjectFilters",
    "JSConsumerPinnedTTLWithoutPriorityPolicyNone",
    "JSConsumerPriorityGroupWithPolicyNone",
    "JSConsumerPriorityPolicyWithoutGroup",
    "JSConsumerPullNotDurableErr",
    "JSConsumerPullRequiresAckErr",
    "JSConsumerPullWithRateLimitErr",
    "JSConsumerPushMaxWaitingErr",
    "JSConsumerPushWithPriorityGroupErr",
    "JSConsumerReplacementWithDifferentNameErr",
    "JSConsumerReplayPolicyInvalidErr",
    "JSConsumerReplicasExceedsStream",
    "JSConsumerReplicasShouldMatchStream",
    "JSConsumerSmallHeartbeatErr",
    "JSConsumerStoreFailedErrF",
    "JSConsumerStreamIdentityMismatchF",
    "JSConsumerWQConsumerNotDeliverAllErr",
    "JSConsumerWQConsumerNotUniqueErr",
    "JSConsumerWQMultipleUnfilteredErr",
    "JSConsumerWQRequiresExplicitAckErr",
    "JSConsumerWithFlowControlNeedsHeartbeats",
    "JSInsufficientResourcesErr",
    "JSInvalidJSONErr",
    "JSMaximumConsumersLimitErr",
    "JSMaximumStreamsLimitErr",
    "JSMemoryResourcesExceededErr",
    "JSMessageCounterBrokenErr",
    "JSMessageIncrDisabledErr",
    "JSMessageIncrInvalidErr",
    "JSMessageIncrMissingErr",
    "JSMessageIncrPayloadErr",
    "JSMessageSchedulesDisabledErr",
    "JSMessageSchedulesPatternInvalidErr",
    "JSMessageSchedulesRollupInvalidErr",
    "JSMessageSchedulesSchedulerInvalidErr",
    "JSMessageSchedulesSourceInvalidErr",
    "JSMessageSchedulesTTLInvalidErr",
    "JSMessageSchedulesTargetInvalidErr",
    "JSMessageSchedulesTimeZoneInvalidErr",
    "JSMessageSourceHdrNotAllowedErr",
    "JSMessageTTLDisabledErr",
    "JSMessageTTLInvalidErr",
    "JSMirrorConsumerRequiresAckFCErr",
    "JSMirrorConsumerSetupFailedErrF",
    "JSMirrorDurableConsumerCfgInvalid",
    "JSMirrorInvalidStreamName",
    "JSMirrorInvalidSubjectFilter",
    "JSMirrorInvalidTransformDestination",
    "JSMirrorMaxMessageSizeTooBigErr",
    "JSMirrorMultipleFiltersNotAllowed",
    "JSMirrorOverlappingSubjectFilters",
    "JSMirrorWithAtomicPublishErr",
    "JSMirrorWithBatchPublishErr",
    "JSMirrorWithCountersErr",
    "JSMirrorWithFirstSeqErr",
    "JSMirrorWithMsgSchedulesErr",
    "JSMirrorWithSourcesErr",
    "JSMirrorWithStartSeqAndTimeErr",
    "JSMirrorWithSubjectFiltersErr",
    "JSMirrorWithSubjectsErr",
    "JSNoAccountErr",
    "JSNoLimitsErr",
    "JSNoMessageFoundErr",
    "JSNotEmptyRequestErr",
    "JSNotEnabledErr",
    "JSNotEnabledForAccountErr",
    "JSPedanticErrF",
    "JSPeerRemapErr",
    "JSRaftGeneralErrF",
    "JSReplicasCountCannotBeNegative",
    "JSRequiredApiLevelErr",
    "JSRestoreSubscribeFailedErrF",
    "JSSequenceNotFoundErrF",
    "JSSnapshotDeliverSubjectInvalidErr",
    "JSSourceConsumerRequiresAckFCErr",
    "JSSourceConsumerSetupFailedErrF",
    "JSSourceDuplicateDetected",
    "JSSourceDurableConsumerCfgInvalid",
    "JSSourceDurableConsumerDuplicateDetected",
    "JSSourceInvalidStreamName",
    "JSSourceInvalidSubjectFilter",
    "JSSourceInvalidTransformDestination",
    "JSSourceMaxMessageSizeTooBigErr",
    "JSSourceMultipleFiltersNotAllowed",
    "JSSourceOverlappingSubjectFilters",
    "JSSourceWithMsgSchedulesErr",
    "JSStorageResourcesExceededErr",
    "JSStreamAssignmentErrF",
    "JSStreamCreateErrF",
    "JSStreamDeleteErrF",
    "JSStreamDuplicateMessageConflict",
    "JSStreamExpectedLastSeqPerSubjectInvalid",
    "JSStreamExpectedLastSeqPerSubjectNotReady",
    "JSStreamExternalApiOverlapErrF",
    "JSStreamExternalDelPrefixOverlapsErrF",
    "JSStreamGeneralErrorF",
    "JSStreamHeaderExceedsMaximumErr",
    "JSStreamInfoMaxSubjectsErr",
    "JSStreamInvalidConfigF",
    "JSStreamInvalidErr",
    "JSStreamInvalidExternalDeliverySubjErrF",
    "JSStreamLimitsErrF",
    "JSStreamMaxBytesRequired",
    "JSStreamMaxStreamBytesExceeded",
    "JSStreamMessageExceedsMaximumErr",
    "JSStreamMinLastSeqErr",
    "JSStreamMirrorNotUpdatableErr",
    "JSStreamMismatchErr",
    "JSStreamMoveAndScaleErr",
    "JSStreamMoveInProgressErr",
    "JSStreamMsgDeleteFailedF",
    "JSStreamNameContainsPathSeparatorsErr",
    "JSStreamNameExistErr",
    "JSStreamNameExistRestoreFailedErr",
    "JSStreamNotFoundErr",
    "JSStreamNotMatchErr",
    "JSStreamOfflineErr",
    "JSStreamOfflineReasonErrF",
    "JSStreamPurgeFailedF",
    "JSStreamReconfigureInProgressErr",
    "JSStreamReconfigureNotInProgressErr",
    "JSStreamReplicasNotSupportedErr",
    "JSStreamReplicasNotUpdatableErr",
    "JSStreamRestoreErrF",
    "JSStreamRollupFailedF",
    "JSStreamSealedErr",
    "JSStreamSequenceNotMatchErr",
    "JSStreamSnapshotErrF",
    "JSStreamStoreFailedF",
    "JSStreamSubjectOverlapErr",
    "JSStreamTemplateCreateErrF",
    "JSStreamTemplateDeleteErrF",
    "JSStreamTemplateNotFoundErr",
    "JSStreamTooManyRequests",
    "JSStreamTransformInvalidDestination",
    "JSStreamTransformInvalidSource",
    "JSStreamUpdateErrF",
    "JSStreamWrongLastMsgIDErrF",
    "JSStreamWrongLastSequenceConstantErr",
    "JSStreamWrongLastSequenceErrF",
    "JSTempStorageFailedErr",
    "JSTemplateNameNotMatchSubjectErr",
]

JSAccountResourcesExceededErr: Final[ErrorDef] = ErrorDef("JSAccountResourcesExceededErr", 400, 10002, "resource limits exceeded for account")
JSAtomicPublishContainsDuplicateMessageErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishContainsDuplicateMessageErr", 400, 10201, "atomic publish batch contains duplicate message id")
JSAtomicPublishDisabledErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishDisabledErr", 400, 10174, "atomic publish is disabled")
JSAtomicPublishIncompleteBatchErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishIncompleteBatchErr", 400, 10176, "atomic publish batch is incomplete")
JSAtomicPublishInvalidBatchCommitErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishInvalidBatchCommitErr", 400, 10200, "atomic publish batch commit is invalid")
JSAtomicPublishInvalidBatchIDErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishInvalidBatchIDErr", 400, 10179, "atomic publish batch ID is invalid")
JSAtomicPublishMissingSeqErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishMissingSeqErr", 400, 10175, "atomic publish sequence is missing")
JSAtomicPublishTooLargeBatchErrF: Final[ErrorDef] = ErrorDef("JSAtomicPublishTooLargeBatchErrF", 400, 10199, "atomic publish batch is too large: {size}")
JSAtomicPublishTooManyInflight: Final[ErrorDef] = ErrorDef("JSAtomicPublishTooManyInflight", 429, 10210, "atomic publish too many inflight")
JSAtomicPublishUnsupportedHeaderBatchErr: Final[ErrorDef] = ErrorDef("JSAtomicPublishUnsupportedHeaderBatchErr", 400, 10177, "atomic publish unsupported header used: {header}")
JSBadRequestErr: Final[ErrorDef] = ErrorDef("JSBadRequestErr", 400, 10003, "bad request")
JSBatchPublishDisabledErr: Final[ErrorDef] = ErrorDef("JSBatchPublishDisabledErr", 400, 10205, "batch publish is disabled")
JSBatchPublishInvalidBatchIDErr: Final[ErrorDef] = ErrorDef("JSBatchPublishInvalidBatchIDErr", 400, 10207, "batch publish ID is invalid")
JSBatchPublishInvalidPatternErr: Final[ErrorDef] = ErrorDef("JSBatchPublishInvalidPatternErr", 400, 10206, "batch publish pattern is invalid")
JSBatchPublishTooManyInflight: Final[ErrorDef] = ErrorDef("JSBatchPublishTooManyInflight", 429, 10211, "batch publish too many inflight")
JSBatchPublishUnknownBatchIDErr: Final[ErrorDef] = ErrorDef("JSBatchPublishUnknownBatchIDErr", 400, 10208, "batch publish ID unknown")
JSClusterIncompleteErr: Final[ErrorDef] = ErrorDef("JSClusterIncompleteErr", 503, 10004, "incomplete results")
# Error causing no peers to be available
JSClusterNoPeersErrF: Final[ErrorDef] = ErrorDef("JSClusterNoPeersErrF", 400, 10005, "{err}")
JSClusterNotActiveErr: Final[ErrorDef] = ErrorDef("JSClusterNotActiveErr", 500, 10006, "JetStream not in clustered mode", deprecates="ErrJetStreamNotClustered")
JSClusterNotAssignedErr: Final[ErrorDef] = ErrorDef("JSClusterNotAssignedErr", 500, 10007, "JetStream cluster not assigned to this server", deprecates="ErrJetStreamNotAssigned")
JSClusterNotAvailErr: Final[ErrorDef] = ErrorDef("JSClusterNotAvailErr", 503, 10008, "JetStream system temporarily unavailable")
JSClusterNotLeaderErr: Final[ErrorDef] = ErrorDef("JSClusterNotLeaderErr", 500, 10009, "JetStream cluster can not handle request", deprecates="ErrJetStreamNotLeader")
JSClusterPeerNotMemberErr: Final[ErrorDef] = ErrorDef("JSClusterPeerNotMemberErr", 400, 10040, "peer not a member")
JSClusterRequiredErr: Final[ErrorDef] = ErrorDef("JSClusterRequiredErr", 503, 10010, "JetStream clustering support required")
JSClusterRescueErr: Final[ErrorDef] = ErrorDef("JSClusterRescueErr", 400, 10224, "JetStream system rescue not applied: {err}")
JSClusterServerMemberChangeInflightErr: Final[ErrorDef] = ErrorDef("JSClusterServerMemberChangeInflightErr", 400, 10202, "cluster member change is in progress")
JSClusterServerNotMemberErr: Final[ErrorDef] = ErrorDef("JSClusterServerNotMemberErr", 400, 10044, "server is not a member of the cluster")
JSClusterTagsErr: Final[ErrorDef] = ErrorDef("JSClusterTagsErr", 400, 10011, "tags placement not supported for operation")
JSClusterUnSupportFeatureErr: Final[ErrorDef] = ErrorDef("JSClusterUnSupportFeatureErr", 503, 10036, "not currently supported in clustered mode")
JSConsumerAckFCRequiresFCErr: Final[ErrorDef] = ErrorDef("JSConsumerAckFCRequiresFCErr", 400, 10219, "flow control ack policy requires flow control")
JSConsumerAckFCRequiresMaxAckPendingErr: Final[ErrorDef] = ErrorDef("JSConsumerAckFCRequiresMaxAckPendingErr", 400, 10220, "flow control ack policy requires max ack pending")
JSConsumerAckFCRequiresNoAckWaitErr: Final[ErrorDef] = ErrorDef("JSConsumerAckFCRequiresNoAckWaitErr", 400, 10221, "flow control ack policy requires unset ack wait")
JSConsumerAckFCRequiresNoMaxDeliverErr: Final[ErrorDef] = ErrorDef("JSConsumerAckFCRequiresNoMaxDeliverErr", 400, 10222, "flow control ack policy requires unset max deliver")
JSConsumerAckFCRequiresPushErr: Final[ErrorDef] = ErrorDef("JSConsumerAckFCRequiresPushErr", 400, 10218, "flow control ack policy requires a push based consumer")
JSConsumerAckPolicyInvalidErr: Final[ErrorDef] = ErrorDef("JSConsumerAckPolicyInvalidErr", 400, 10181, "consumer ack policy invalid")
JSConsumerAckWaitNegativeErr: Final[ErrorDef] = ErrorDef("JSConsumerAckWaitNegativeErr", 400, 10183, "consumer ack wait needs to be positive")
# action CREATE is used for a existing consumer with a different config
JSConsumerAlreadyExists: Final[ErrorDef] = ErrorDef("JSConsumerAlreadyExists", 400, 10148, "consumer already exists")
JSConsumerBackOffNegativeErr: Final[ErrorDef] = ErrorDef("JSConsumerBackOffNegativeErr", 400, 10184, "consumer backoff needs to be positive")
JSConsumerBadDurableNameErr: Final[ErrorDef] = ErrorDef("JSConsumerBadDurableNameErr", 400, 10103, "durable name can not contain '.', '*', '>'")
JSConsumerConfigRequiredErr: Final[ErrorDef] = ErrorDef("JSConsumerConfigRequiredErr", 400, 10078, "consumer config required")
JSConsumerCreateDurableAndNameMismatch: Final[ErrorDef] = ErrorDef("JSConsumerCreateDurableAndNameMismatch", 400, 10132, "Consumer Durable and Name have to be equal if both are provided")
# General consumer creation failure string
JSConsumerCreateErrF: Final[ErrorDef] = ErrorDef("JSConsumerCreateErrF", 500, 10012, "{err}")
JSConsumerCreateFilterSubjectMismatchErr: Final[ErrorDef] = ErrorDef("JSConsumerCreateFilterSubjectMismatchErr", 400, 10131, "Consumer create request did not match filtered subject from create subject")
JSConsumerDeliverCycleErr: Final[ErrorDef] = ErrorDef("JSConsumerDeliverCycleErr", 400, 10081, "consumer deliver subject forms a cycle")
JSConsumerDeliverToWildcardsErr: Final[ErrorDef] = ErrorDef("JSConsumerDeliverToWildcardsErr", 400, 10079, "consumer deliver subject has wildcards")
JSConsumerDescriptionTooLongErrF: Final[ErrorDef] = ErrorDef("JSConsumerDescriptionTooLongErrF", 400, 10107, "consumer description is too long, maximum allowed is {max}")
JSConsumerDirectRequiresEphemeralErr: Final[ErrorDef] = ErrorDef("JSConsumerDirectRequiresEphemeralErr", 400, 10091, "consumer direct requires an ephemeral consumer")
JSConsumerDirectRequiresPushErr: Final[ErrorDef] = ErrorDef("JSConsumerDirectRequiresPushErr", 400, 10090, "consumer direct requires a push based consumer")
# action UPDATE is used for a nonexisting consumer
JSConsumerDoesNotExist: Final[ErrorDef] = ErrorDef("JSConsumerDoesNotExist", 400, 10149, "consumer does not exist")
JSConsumerDuplicateFilterSubjects: Final[ErrorDef] = ErrorDef("JSConsumerDuplicateFilterSubjects", 400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")
JSConsumerDurableNameNotInSubjectErr: Final[ErrorDef] = ErrorDef("JSConsumerDurableNameNotInSubjectErr", 400, 10016, "consumer expected to be durable but no durable name set in subject")
JSConsumerDurableNameNotMatchSubjectErr: Final[ErrorDef] = ErrorDef("JSConsumerDurableNameNotMatchSubjectErr", 400, 10017, "consumer name in subject does not match durable name in request")
JSConsumerDurableNameNotSetErr: Final[ErrorDef] = ErrorDef("JSConsumerDurableNameNotSetErr", 400, 10018, "consumer expected to be durable but a durable name was not set")
JSConsumerEmptyFilter: Final[ErrorDef] = ErrorDef("JSConsumerEmptyFilter", 400, 10139, "consumer filter in FilterSubjects cannot be empty")
JSConsumerEmptyGroupName: Final[ErrorDef] = ErrorDef("JSConsumerEmptyGroupName", 400, 10161, "Group name cannot be an empty string")
JSConsumerEphemeralWithDurableInSubjectErr: Final[ErrorDef] = ErrorDef("JSConsumerEphemeralWithDurableInSubjectErr", 400, 10019, "consumer expected to be ephemeral but detected a durable name set in subject")
JSConsumerEphemeralWithDurableNameErr: Final[ErrorDef] = ErrorDef("JSConsumerEphemeralWithDurableNameErr", 400, 10020, "consumer expected to be ephemeral but a durable name was set in request")
JSConsumerExistingActiveErr: Final[ErrorDef] = ErrorDef("JSConsumerExistingActiveErr", 400, 10105, "consumer already exists and is still active")
JSConsumerFCRequiresPushErr: Final[ErrorDef] = ErrorDef("JSConsumerFCRequiresPushErr", 400, 10089, "consumer flow control requires a push based consumer")
JSConsumerFilterNotSubsetErr: Final[ErrorDef] = ErrorDef("JSConsumerFilterNotSubsetErr", 400, 10093, "consumer filter subject is not a valid subset of the interest subjects")
JSConsumerHBRequiresPushErr: Final[ErrorDef] = ErrorDef("JSConsumerHBRequiresPushErr", 400, 10088, "consumer idle heartbeat requires a push based consumer")
JSConsumerInactiveThresholdExcess: Final[ErrorDef] = ErrorDef("JSConsumerInactiveThresholdExcess", 400, 10153, "consumer inactive threshold exceeds system limit of {limit}")
JSConsumerInvalidDeliverSubject: Final[ErrorDef] = ErrorDef("JSConsumerInvalidDeliverSubject", 400, 10112, "invalid push consumer deliver subject")
JSConsumerInvalidGroupNameErr: Final[ErrorDef] = ErrorDef("JSConsumerInvalidGroupNameErr", 400, 10162, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters")
# Generic delivery policy error
JSConsumerInvalidPolicyErrF: Final[ErrorDef] = ErrorDef("JSConsumerInvalidPolicyErrF", 400, 10094, "{err}")
JSConsumerInvalidPriorityGroupErr: Final[ErrorDef] = ErrorDef("JSConsumerInvalidPriorityGroupErr", 400, 10160, "Provided priority group does not exist for this consumer")
JSConsumerInvalidResetErr: Final[ErrorDef] = ErrorDef("JSConsumerInvalidResetErr", 400, 10204, "invalid reset: {err}")
JSConsumerInvalidSamplingErrF: Final[ErrorDef] = ErrorDef("JSConsumerInvalidSamplingErrF", 400, 10095, "failed to parse consumer sampling configuration: {err}")
JSConsumerMaxDeliverBackoffErr: Final[ErrorDef] = ErrorDef("JSConsumerMaxDeliverBackoffErr", 400, 10116, "max deliver is required to be > length of backoff values")
JSConsumerMaxPendingAckExcessErrF: Final[ErrorDef] = ErrorDef("JSConsumerMaxPendingAckExcessErrF", 400, 10121, "consumer max ack pending exceeds system limit of {limit}")
JSConsumerMaxPendingAckPolicyRequiredErr: Final[ErrorDef] = ErrorDef("JSConsumerMaxPendingAckPolicyRequiredErr", 400, 10082, "consumer requires ack policy for max ack pending")
JSConsumerMaxRequestBatchExceededF: Final[ErrorDef] = ErrorDef("JSConsumerMaxRequestBatchExceededF", 400, 10125, "consumer max request batch exceeds server limit of {limit}")
JSConsumerMaxRequestBatchNegativeErr: Final[ErrorDef] = ErrorDef("JSConsumerMaxRequestBatchNegativeErr", 400, 10114, "consumer max request batch needs to be > 0")
JSConsumerMaxRequestExpiresTooSmall: Final[ErrorDef] = ErrorDef("JSConsumerMaxRequestExpiresTooSmall", 400, 10115, "consumer max request expires needs to be >= 1ms")
JSConsumerMaxWaitingNegativeErr: Final[ErrorDef] = ErrorDef("JSConsumerMaxWaitingNegativeErr", 400, 10087, "consumer max waiting needs to be positive")
JSConsumerMetadataLengthErrF: Final[ErrorDef] = ErrorDef("JSConsumerMetadataLengthErrF", 400, 10135, "consumer metadata exceeds maximum size of {limit}")
JSConsumerMultipleFiltersNotAllowed: Final[ErrorDef] = ErrorDef("JSConsumerMultipleFiltersNotAllowed", 400, 10137, "consumer with multiple subject filters cannot use subject based API")
JSConsumerNameContainsPathSeparatorsErr: Final[ErrorDef] = ErrorDef("JSConsumerNameContainsPathSeparatorsErr", 400, 10127, "Consumer name can not contain path separators")
JSConsumerNameExistErr: Final[ErrorDef] = ErrorDef("JSConsumerNameExistErr", 400, 10013, "consumer name already in use", deprecates="ErrJetStreamConsumerAlreadyUsed")
JSConsumerNameTooLongErrF: Final[ErrorDef] = ErrorDef("JSConsumerNameTooLongErrF", 400, 10102, "consumer name is too long, maximum allowed is {max}")
JSConsumerNotFoundErr: Final[ErrorDef] = ErrorDef("JSConsumerNotFoundErr", 404, 10014, "consumer not found")
JSConsumerOfflineErr: Final[ErrorDef] = ErrorDef("JSConsumerOfflineErr", 500, 10119, "consumer is offline")
JSConsumerOfflineReasonErrF: Final[ErrorDef] = ErrorDef("JSConsumerOfflineReasonErrF", 500, 10195, "consumer is offline: {err}")
JSConsumerOnMappedErr: Final[ErrorDef] = ErrorDef("JSConsumerOnMappedErr", 400, 10092, "consumer direct on a mapped consumer")
JSConsumerOverlappingSubjectFilters: Final[ErrorDef] = ErrorDef("JSConsumerOverlappingSubjectFilters", 400, 10138, "consumer subject filters cannot overlap")
JSConsumerPinnedTTLWithoutPriorityPolicyNone: Final[ErrorDef] = ErrorDef("JSConsumerPinnedTTLWithoutPriorityPolicyNone", 400, 10197, "PinnedTTL cannot be set when PriorityPolicy is none")
JSConsumerPriorityGroupWithPolicyNone: Final[ErrorDef] = ErrorDef("JSConsumerPriorityGroupWithPolicyNone", 400, 10196, "consumer can not have priority groups when policy is none")
JSConsumerPriorityPolicyWithoutGroup: Final[ErrorDef] = ErrorDef("JSConsumerPriorityPolicyWithoutGroup", 400, 10159, "Setting PriorityPolicy requires at least one PriorityGroup to be set")
JSConsumerPullNotDurableErr: Final[ErrorDef] = ErrorDef("JSConsumerPullNotDurableErr", 400, 10085, "consumer in pull mode requires a durable name")
JSConsumerPullRequiresAckErr: Final[ErrorDef] = ErrorDef("JSConsumerPullRequiresAckErr", 400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream")
JSConsumerPullWithRateLimitErr: Final[ErrorDef] = ErrorDef("JSConsumerPullWithRateLimitErr", 400, 10086, "consumer in pull mode can not have rate limit set")
JSConsumerPushMaxWaitingErr: Final[ErrorDef] = ErrorDef("JSConsumerPushMaxWaitingErr", 400, 10080, "consumer in push mode can not set max waiting")
JSConsumerPushWithPriorityGroupErr: Final[ErrorDef] = ErrorDef("JSConsumerPushWithPriorityGroupErr", 400, 10178, "priority groups can not be used with push consumers")
JSConsumerReplacementWithDifferentNameErr: Final[ErrorDef] = ErrorDef("JSConsumerReplacementWithDifferentNameErr", 400, 10106, "consumer replacement durable config not the same")
JSConsumerReplayPolicyInvalidErr: Final[ErrorDef] = ErrorDef("JSConsumerReplayPolicyInvalidErr", 400, 10182, "consumer replay policy invalid")
JSConsumerReplicasExceedsStream: Final[ErrorDef] = ErrorDef("JSConsumerReplicasExceedsStream", 400, 10126, "consumer config replica count exceeds parent stream")
JSConsumerReplicasShouldMatchStream: Final[ErrorDef] = ErrorDef("JSConsumerReplicasShouldMatchStream", 400, 10134, "consumer config replicas must match interest retention stream's replicas")
JSConsumerSmallHeartbeatErr: Final[ErrorDef] = ErrorDef("JSConsumerSmallHeartbeatErr", 400, 10083, "consumer idle heartbeat needs to be >= 100ms")
JSConsumerStoreFailedErrF: Final[ErrorDef] = ErrorDef("JSConsumerStoreFailedErrF", 500, 10104, "error creating store for consumer: {err}")
JSConsumerStreamIdentityMismatchF: Final[ErrorDef] = ErrorDef("JSConsumerStreamIdentityMismatchF", 400, 10225, "consumer's stream identity does not match: {msg}")
JSConsumerWQConsumerNotDeliverAllErr: Final[ErrorDef] = ErrorDef("JSConsumerWQConsumerNotDeliverAllErr", 400, 10101, "consumer must be deliver all on workqueue stream")
JSConsumerWQConsumerNotUniqueErr: Final[ErrorDef] = ErrorDef("JSConsumerWQConsumerNotUniqueErr", 400, 10100, "filtered consumer not unique on workqueue stream")
JSConsumerWQMultipleUnfilteredErr: Final[ErrorDef] = ErrorDef("JSConsumerWQMultipleUnfilteredErr", 400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")
JSConsumerWQRequiresExplicitAckErr: Final[ErrorDef] = ErrorDef("JSConsumerWQRequiresExplicitAckErr", 400, 10098, "workqueue stream requires explicit ack")
JSConsumerWithFlowControlNeedsHeartbeats: Final[ErrorDef] = ErrorDef("JSConsumerWithFlowControlNeedsHeartbeats", 400, 10108, "consumer with flow control also needs heartbeats")
JSInsufficientResourcesErr: Final[ErrorDef] = ErrorDef("JSInsufficientResourcesErr", 503, 10023, "insufficient resources", deprecates="ErrJetStreamResourcesExceeded")
JSInvalidJSONErr: Final[ErrorDef] = ErrorDef("JSInvalidJSONErr", 400, 10025, "invalid JSON: {err}")
JSMaximumConsumersLimitErr: Final[ErrorDef] = ErrorDef("JSMaximumConsumersLimitErr", 400, 10026, "maximum consumers limit reached")
JSMaximumStreamsLimitErr: Final[ErrorDef] = ErrorDef("JSMaximumStreamsLimitErr", 400, 10027, "maximum number of streams reached")
JSMemoryResourcesExceededErr: Final[ErrorDef] = ErrorDef("JSMemoryResourcesExceededErr", 500, 10028, "insufficient memory resources available", deprecates="ErrMemoryResourcesExceeded")
JSMessageCounterBrokenErr: Final[ErrorDef] = ErrorDef("JSMessageCounterBrokenErr", 400, 10172, "message counter is broken")
JSMessageIncrDisabledErr: Final[ErrorDef] = ErrorDef("JSMessageIncrDisabledErr", 400, 10168, "message counters is disabled")
JSMessageIncrInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageIncrInvalidErr", 400, 10171, "message counter increment is invalid")
JSMessageIncrMissingErr: Final[ErrorDef] = ErrorDef("JSMessageIncrMissingErr", 400, 10169, "message counter increment is missing")
JSMessageIncrPayloadErr: Final[ErrorDef] = ErrorDef("JSMessageIncrPayloadErr", 400, 10170, "message counter has payload")
JSMessageSchedulesDisabledErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesDisabledErr", 400, 10188, "message schedules is disabled")
JSMessageSchedulesPatternInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesPatternInvalidErr", 400, 10189, "message schedules pattern is invalid")
JSMessageSchedulesRollupInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesRollupInvalidErr", 400, 10192, "message schedules invalid rollup")
JSMessageSchedulesSchedulerInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesSchedulerInvalidErr", 400, 10212, "message schedules invalid scheduler")
JSMessageSchedulesSourceInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesSourceInvalidErr", 400, 10203, "message schedules source is invalid")
JSMessageSchedulesTTLInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesTTLInvalidErr", 400, 10191, "message schedules invalid per-message TTL")
JSMessageSchedulesTargetInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesTargetInvalidErr", 400, 10190, "message schedules target is invalid")
JSMessageSchedulesTimeZoneInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageSchedulesTimeZoneInvalidErr", 400, 10223, "message schedules time zone is invalid")
JSMessageSourceHdrNotAllowedErr: Final[ErrorDef] = ErrorDef("JSMessageSourceHdrNotAllowedErr", 400, 10227, "message stream source header is not allowed")
JSMessageTTLDisabledErr: Final[ErrorDef] = ErrorDef("JSMessageTTLDisabledErr", 400, 10166, "per-message TTL is disabled")
JSMessageTTLInvalidErr: Final[ErrorDef] = ErrorDef("JSMessageTTLInvalidErr", 400, 10165, "invalid per-message TTL")
JSMirrorConsumerRequiresAckFCErr: Final[ErrorDef] = ErrorDef("JSMirrorConsumerRequiresAckFCErr", 400, 10214, "stream mirror consumer requires flow control ack policy")
# generic mirror consumer setup failure string
JSMirrorConsumerSetupFailedErrF: Final[ErrorDef] = ErrorDef("JSMirrorConsumerSetupFailedErrF", 500, 10029, "{err}")
JSMirrorDurableConsumerCfgInvalid: Final[ErrorDef] = ErrorDef("JSMirrorDurableConsumerCfgInvalid", 400, 10213, "stream mirror consumer config is invalid")
JSMirrorInvalidStreamName: Final[ErrorDef] = ErrorDef("JSMirrorInvalidStreamName", 400, 10142, "mirrored stream name is invalid")
JSMirrorInvalidSubjectFilter: Final[ErrorDef] = ErrorDef("JSMirrorInvalidSubjectFilter", 400, 10151, "mirror transform source: {err}")
JSMirrorInvalidTransformDestination: Final[ErrorDef] = ErrorDef("JSMirrorInvalidTransformDestination", 400, 10154, "mirror transform: {err}")
JSMirrorMaxMessageSizeTooBigErr: Final[ErrorDef] = ErrorDef("JSMirrorMaxMessageSizeTooBigErr", 400, 10030, "stream mirror must have max message size >= source")
JSMirrorMultipleFiltersNotAllowed: Final[ErrorDef] = ErrorDef("JSMirrorMultipleFiltersNotAllowed", 400, 10150, "mirror with multiple subject transforms cannot also have a single subject filter")
JSMirrorOverlappingSubjectFilters: Final[ErrorDef] = ErrorDef("JSMirrorOverlappingSubjectFilters", 400, 10152, "mirror subject filters can not overlap")
JSMirrorWithAtomicPublishErr: Final[ErrorDef] = ErrorDef("JSMirrorWithAtomicPublishErr", 400, 10198, "stream mirrors can not also use atomic publishing")
JSMirrorWithBatchPublishErr: Final[ErrorDef] = ErrorDef("JSMirrorWithBatchPublishErr", 400, 10209, "stream mirrors can not also use batch publishing")
JSMirrorWithCountersErr: Final[ErrorDef] = ErrorDef("JSMirrorWithCountersErr", 400, 10173, "stream mirrors can not also calculate counters")
JSMirrorWithFirstSeqErr: Final[ErrorDef] = ErrorDef("JSMirrorWithFirstSeqErr", 400, 10143, "stream mirrors can not have first sequence configured")
JSMirrorWithMsgSchedulesErr: Final[ErrorDef] = ErrorDef("JSMirrorWithMsgSchedulesErr", 400, 10186, "stream mirrors can not also schedule messages")
JSMirrorWithSourcesErr: Final[ErrorDef] = ErrorDef("JSMirrorWithSourcesErr", 400, 10031, "stream mirrors can not also contain other sources")
JSMirrorWithStartSeqAndTimeErr: Final[ErrorDef] = ErrorDef("JSMirrorWithStartSeqAndTimeErr", 400, 10032, "stream mirrors can not have both start seq and start time configured")
JSMirrorWithSubjectFiltersErr: Final[ErrorDef] = ErrorDef("JSMirrorWithSubjectFiltersErr", 400, 10033, "stream mirrors can not contain filtered subjects")
JSMirrorWithSubjectsErr: Final[ErrorDef] = ErrorDef("JSMirrorWithSubjectsErr", 400, 10034, "stream mirrors can not contain subjects")
JSNoAccountErr: Final[ErrorDef] = ErrorDef("JSNoAccountErr", 503, 10035, "account not found")
JSNoLimitsErr: Final[ErrorDef] = ErrorDef("JSNoLimitsErr", 400, 10120, "no JetStream default or applicable tiered limit present")
JSNoMessageFoundErr: Final[ErrorDef] = ErrorDef("JSNoMessageFoundErr", 404, 10037, "no message found")
JSNotEmptyRequestErr: Final[ErrorDef] = ErrorDef("JSNotEmptyRequestErr", 400, 10038, "expected an empty request payload")
JSNotEnabledErr: Final[ErrorDef] = ErrorDef("JSNotEnabledErr", 503, 10076, "JetStream not enabled", deprecates="ErrJetStreamNotEnabled")
JSNotEnabledForAccountErr: Final[ErrorDef] = ErrorDef("JSNotEnabledForAccountErr", 503, 10039, "JetStream not enabled for account")
JSPedanticErrF: Final[ErrorDef] = ErrorDef("JSPedanticErrF", 400, 10157, "pedantic mode: {err}")
JSPeerRemapErr: Final[ErrorDef] = ErrorDef("JSPeerRemapErr", 503, 10075, "peer remap failed")
# General RAFT error string
JSRaftGeneralErrF: Final[ErrorDef] = ErrorDef("JSRaftGeneralErrF", 500, 10041, "{err}")
JSReplicasCountCannotBeNegative: Final[ErrorDef] = ErrorDef("JSReplicasCountCannotBeNegative", 400, 10133, "replicas count cannot be negative")
JSRequiredApiLevelErr: Final[ErrorDef] = ErrorDef("JSRequiredApiLevelErr", 412, 10185, "JetStream minimum api level required")
JSRestoreSubscribeFailedErrF: Final[ErrorDef] = ErrorDef("JSRestoreSubscribeFailedErrF", 500, 10042, "JetStream unable to subscribe to restore snapshot {subject}: {err}")
JSSequenceNotFoundErrF: Final[ErrorDef] = ErrorDef("JSSequenceNotFoundErrF", 400, 10043, "sequence {seq} not found")
JSSnapshotDeliverSubjectInvalidErr: Final[ErrorDef] = ErrorDef("JSSnapshotDeliverSubjectInvalidErr", 400, 10015, "deliver subject not valid")
JSSourceConsumerRequiresAckFCErr: Final[ErrorDef] = ErrorDef("JSSourceConsumerRequiresAckFCErr", 400, 10217, "stream source consumer requires flow control ack policy")
# General source consumer setup failure string
JSSourceConsumerSetupFailedErrF: Final[ErrorDef] = ErrorDef("JSSourceConsumerSetupFailedErrF", 500, 10045, "{err}")
# source stream, filter and transform (plus external if present) must form a unique combination
JSSourceDuplicateDetected: Final[ErrorDef] = ErrorDef("JSSourceDuplicateDetected", 400, 10140, "duplicate source configuration detected")
JSSourceDurableConsumerCfgInvalid: Final[ErrorDef] = ErrorDef("JSSourceDurableConsumerCfgInvalid", 400, 10215, "stream source consumer config is invalid")
JSSourceDurableConsumerDuplicateDetected: Final[ErrorDef] = ErrorDef("JSSourceDurableConsumerDuplicateDetected", 400, 10216, "duplicate stream source consumer detected")
JSSourceInvalidStreamName: Final[ErrorDef] = ErrorDef("JSSourceInvalidStreamName", 400, 10141, "sourced stream name is invalid")
JSSourceInvalidSubjectFilter: Final[ErrorDef] = ErrorDef("JSSourceInvalidSubjectFilter", 400, 10145, "source transform source: {err}")
JSSourceInvalidTransformDestination: Final[ErrorDef] = ErrorDef("JSSourceInvalidTransformDestination", 400, 10146, "source transform: {err}")
JSSourceMaxMessageSizeTooBigErr: Final[ErrorDef] = ErrorDef("JSSourceMaxMessageSizeTooBigErr", 400, 10046, "stream source must have max message size >= target")
JSSourceMultipleFiltersNotAllowed: Final[ErrorDef] = ErrorDef("JSSourceMultipleFiltersNotAllowed", 400, 10144, "source with multiple subject transforms cannot also have a single subject filter")
JSSourceOverlappingSubjectFilters: Final[ErrorDef] = ErrorDef("JSSourceOverlappingSubjectFilters", 400, 10147, "source filters can not overlap")
JSSourceWithMsgSchedulesErr: Final[ErrorDef] = ErrorDef("JSSourceWithMsgSchedulesErr", 400, 10187, "stream source can not also schedule messages")
JSStorageResourcesExceededErr: Final[ErrorDef] = ErrorDef("JSStorageResourcesExceededErr", 500, 10047, "insufficient storage resources available", deprecates="ErrStorageResourcesExceeded")
# Generic stream assignment error string
JSStreamAssignmentErrF: Final[ErrorDef] = ErrorDef("JSStreamAssignmentErrF", 500, 10048, "{err}")
# Generic stream creation error string
JSStreamCreateErrF: Final[ErrorDef] = ErrorDef("JSStreamCreateErrF", 500, 10049, "{err}")
# General stream deletion error string
JSStreamDeleteErrF: Final[ErrorDef] = ErrorDef("JSStreamDeleteErrF", 500, 10050, "{err}")
JSStreamDuplicateMessageConflict: Final[ErrorDef] = ErrorDef("JSStreamDuplicateMessageConflict", 409, 10158, "duplicate message id is in process")
JSStreamExpectedLastSeqPerSubjectInvalid: Final[ErrorDef] = ErrorDef("JSStreamExpectedLastSeqPerSubjectInvalid", 400, 10193, "missing sequence for expected last sequence per subject")
JSStreamExpectedLastSeqPerSubjectNotReady: Final[ErrorDef] = ErrorDef("JSStreamExpectedLastSeqPerSubjectNotReady", 503, 10163, "expected last sequence per subject temporarily unavailable")
JSStreamExternalApiOverlapErrF: Final[ErrorDef] = ErrorDef("JSStreamExternalApiOverlapErrF", 400, 10021, "stream external api prefix {prefix} must not overlap with {subject}")
JSStreamExternalDelPrefixOverlapsErrF: Final[ErrorDef] = ErrorDef("JSStreamExternalDelPrefixOverlapsErrF", 400, 10022, "stream external delivery prefix {prefix} overlaps with stream subject {subject}")
# General stream failure string
JSStreamGeneralErrorF: Final[ErrorDef] = ErrorDef("JSStreamGeneralErrorF", 500, 10051, "{err}")
JSStreamHeaderExceedsMaximumErr: Final[ErrorDef] = ErrorDef("JSStreamHeaderExceedsMaximumErr", 400, 10097, "header size exceeds maximum allowed of 64k")
JSStreamInfoMaxSubjectsErr: Final[ErrorDef] = ErrorDef("JSStreamInfoMaxSubjectsErr", 500, 10117, "subject details would exceed maximum allowed")
# Stream configuration validation error string
JSStreamInvalidConfigF: Final[ErrorDef] = ErrorDef("JSStreamInvalidConfigF", 500, 10052, "{err}")
JSStreamInvalidErr: Final[ErrorDef] = ErrorDef("JSStreamInvalidErr", 500, 10096, "stream not valid")
JSStreamInvalidExternalDeliverySubjErrF: Final[ErrorDef] = ErrorDef("JSStreamInvalidExternalDeliverySubjErrF", 400, 10024, "stream external delivery prefix {prefix} must not contain wildcards")
# General stream limits exceeded error string
JSStreamLimitsErrF: Final[ErrorDef] = ErrorDef("JSStreamLimitsErrF", 500, 10053, "{err}")
JSStreamMaxBytesRequired: Final[ErrorDef] = ErrorDef("JSStreamMaxBytesRequired", 400, 10113, "account requires a stream config to have max bytes set")
JSStreamMaxStreamBytesExceeded: Final[ErrorDef] = ErrorDef("JSStreamMaxStreamBytesExceeded", 400, 10122, "stream max bytes exceeds account limit max stream bytes")
JSStreamMessageExceedsMaximumErr: Final[ErrorDef] = ErrorDef("JSStreamMessageExceedsMaximumErr", 400, 10054, "message size exceeds maximum allowed")
JSStreamMinLastSeqErr: Final[ErrorDef] = ErrorDef("JSStreamMinLastSeqErr", 412, 10180, "min last sequence")
JSStreamMirrorNotUpdatableErr: Final[ErrorDef] = ErrorDef("JSStreamMirrorNotUpdatableErr", 400, 10055, "stream mirror configuration can not be updated")
JSStreamMismatchErr: Final[ErrorDef] = ErrorDef("JSStreamMismatchErr", 400, 10056, "stream name in subject does not match request")
JSStreamMoveAndScaleErr: Final[ErrorDef] = ErrorDef("JSStreamMoveAndScaleErr", 400, 10123, "can not move and scale a stream in a single update")
JSStreamMoveInProgressErr: Final[ErrorDef] = ErrorDef("JSStreamMoveInProgressErr", 400, 10124, "stream move already in progress")
# Generic message deletion failure error string
JSStreamMsgDeleteFailedF: Final[ErrorDef] = ErrorDef("JSStreamMsgDeleteFailedF", 500, 10057, "{err}")
JSStreamNameContainsPathSeparatorsErr: Final[ErrorDef] = ErrorDef("JSStreamNameContainsPathSeparatorsErr", 400, 10128, "Stream name can not contain path separators")
JSStreamNameExistErr: Final[ErrorDef] = ErrorDef("JSStreamNameExistErr", 400, 10058, "stream name already in use with a different configuration", deprecates="ErrJetStreamStreamAlreadyUsed")
JSStreamNameExistRestoreFailedErr: Final[ErrorDef] = ErrorDef("JSStreamNameExistRestoreFailedErr", 400, 10130, "stream name already in use, cannot restore")
JSStreamNotFoundErr: Final[ErrorDef] = ErrorDef("JSStreamNotFoundErr", 404, 10059, "stream not found", deprecates="ErrJetStreamStreamNotFound")
JSStreamNotMatchErr: Final[ErrorDef] = ErrorDef("JSStreamNotMatchErr", 400, 10060, "expected stream does not match")
JSStreamOfflineErr: Final[ErrorDef] = ErrorDef("JSStreamOfflineErr", 500, 10118, "stream is offline")
JSStreamOfflineReasonErrF: Final[ErrorDef] = ErrorDef("JSStreamOfflineReasonErrF", 500, 10194, "stream is offline: {err}")
# Generic stream purge failure error string
JSStreamPurgeFailedF: Final[ErrorDef] = ErrorDef("JSStreamPurgeFailedF", 500, 10110, "{err}")
JSStreamReconfigureInProgressErr: Final[ErrorDef] = ErrorDef("JSStreamReconfigureInProgressErr", 400, 10226, "stream reconfiguration already in progress")
JSStreamReconfigureNotInProgressErr: Final[ErrorDef] = ErrorDef("JSStreamReconfigureNotInProgressErr", 400, 10129, "stream reconfiguration not in progress")
JSStreamReplicasNotSupportedErr: Final[ErrorDef] = ErrorDef("JSStreamReplicasNotSupportedErr", 500, 10074, "replicas > 1 not supported in non-clustered mode", deprecates="ErrReplicasNotSupported")
JSStreamReplicasNotUpdatableErr: Final[ErrorDef] = ErrorDef("JSStreamReplicasNotUpdatableErr", 400, 10061, "Replicas configuration can not be updated")
JSStreamRestoreErrF: Final[ErrorDef] = ErrorDef("JSStreamRestoreErrF", 500, 10062, "restore failed: {err}")
# Generic stream rollup failure error string
JSStreamRollupFailedF: Final[ErrorDef] = ErrorDef("JSStreamRollupFailedF", 500, 10111, "{err}")
JSStreamSealedErr: Final[ErrorDef] = ErrorDef("JSStreamSealedErr", 400, 10109, "invalid operation on sealed stream")
JSStreamSequenceNotMatchErr: Final[ErrorDef] = ErrorDef("JSStreamSequenceNotMatchErr", 503, 10063, "expected stream sequence does not match")
JSStreamSnapshotErrF: Final[ErrorDef] = ErrorDef("JSStreamSnapshotErrF", 500, 10064, "snapshot failed: {err}")
# Generic error when storing a message failed
JSStreamStoreFailedF: Final[ErrorDef] = ErrorDef("JSStreamStoreFailedF", 503, 10077, "{err}")
JSStreamSubjectOverlapErr: Final[ErrorDef] = ErrorDef("JSStreamSubjectOverlapErr", 400, 10065, "subjects overlap with an existing stream")
# Generic template creation failed string
JSStreamTemplateCreateErrF: Final[ErrorDef] = ErrorDef("JSStreamTemplateCreateErrF", 500, 10066, "{err}")
# Generic stream template deletion failed error string
JSStreamTemplateDeleteErrF: Final[ErrorDef] = ErrorDef("JSStreamTemplateDeleteErrF", 500, 10067, "{err}")
JSStreamTemplateNotFoundErr: Final[ErrorDef] = ErrorDef("JSStreamTemplateNotFoundErr", 404, 10068, "template not found")
JSStreamTooManyRequests: Final[ErrorDef] = ErrorDef("JSStreamTooManyRequests", 429, 10167, "too many requests")
JSStreamTransformInvalidDestination: Final[ErrorDef] = ErrorDef("JSStreamTransformInvalidDestination", 400, 10156, "stream transform: {err}")
JSStreamTransformInvalidSource: Final[ErrorDef] = ErrorDef("JSStreamTransformInvalidSource", 400, 10155, "stream transform source: {err}")
# Generic stream update error string
JSStreamUpdateErrF: Final[ErrorDef] = ErrorDef("JSStreamUpdateErrF", 500, 10069, "{err}")
JSStreamWrongLastMsgIDErrF: Final[ErrorDef] = ErrorDef("JSStreamWrongLastMsgIDErrF", 400, 10070, "wrong last msg ID: {id}")
JSStreamWrongLastSequenceConstantErr: Final[ErrorDef] = ErrorDef("JSStreamWrongLastSequenceConstantErr", 400, 10164, "wrong last sequence")
JSStreamWrongLastSequenceErrF: Final[ErrorDef] = ErrorDef("JSStreamWrongLastSequenceErrF", 400, 10071, "wrong last sequence: {seq}")
JSTempStorageFailedErr: Final[ErrorDef] = ErrorDef("JSTempStorageFailedErr", 500, 10072, "JetStream unable to open temp storage for restore")
JSTemplateNameNotMatchSubjectErr: Final[ErrorDef] = ErrorDef("JSTemplateNameNotMatchSubjectErr", 400, 10073, "template name in subject does not match request")

API_ERRORS: Final[dict[str, ErrorDef]] = {
    "JSAccountResourcesExceededErr": JSAccountResourcesExceededErr,
    "JSAtomicPublishContainsDuplicateMessageErr": JSAtomicPublishContainsDuplicateMessageErr,
    "JSAtomicPublishDisabledErr": JSAtomicPublishDisabledErr,
    "JSAtomicPublishIncompleteBatchErr": JSAtomicPublishIncompleteBatchErr,
    "JSAtomicPublishInvalidBatchCommitErr": JSAtomicPublishInvalidBatchCommitErr,
    "JSAtomicPublishInvalidBatchIDErr": JSAtomicPublishInvalidBatchIDErr,
    "JSAtomicPublishMissingSeqErr": JSAtomicPublishMissingSeqErr,
    "JSAtomicPublishTooLargeBatchErrF": JSAtomicPublishTooLargeBatchErrF,
    "JSAtomicPublishTooManyInflight": JSAtomicPublishTooManyInflight,
    "JSAtomicPublishUnsupportedHeaderBatchErr": JSAtomicPublishUnsupportedHeaderBatchErr,
    "JSBadRequestErr": JSBadRequestErr,
    "JSBatchPublishDisabledErr": JSBatchPublishDisabledErr,
    "JSBatchPublishInvalidBatchIDErr": JSBatchPublishInvalidBatchIDErr,
    "JSBatchPublishInvalidPatternErr": JSBatchPublishInvalidPatternErr,
    "JSBatchPublishTooManyInflight": JSBatchPublishTooManyInflight,
    "JSBatchPublishUnknownBatchIDErr": JSBatchPublishUnknownBatchIDErr,
    "JSClusterIncompleteErr": JSClusterIncompleteErr,
    "JSClusterNoPeersErrF": JSClusterNoPeersErrF,
    "JSClusterNotActiveErr": JSClusterNotActiveErr,
    "JSClusterNotAssignedErr": JSClusterNotAssignedErr,
    "JSClusterNotAvailErr": JSClusterNotAvailErr,
    "JSClusterNotLeaderErr": JSClusterNotLeaderErr,
    "JSClusterPeerNotMemberErr": JSClusterPeerNotMemberErr,
    "JSClusterRequiredErr": JSClusterRequiredErr,
    "JSClusterRescueErr": JSClusterRescueErr,
    "JSClusterServerMemberChangeInflightErr": JSClusterServerMemberChangeInflightErr,
    "JSClusterServerNotMemberErr": JSClusterServerNotMemberErr,
    "JSClusterTagsErr": JSClusterTagsErr,
    "JSClusterUnSupportFeatureErr": JSClusterUnSupportFeatureErr,
    "JSConsumerAckFCRequiresFCErr": JSConsumerAckFCRequiresFCErr,
    "JSConsumerAckFCRequiresMaxAckPendingErr": JSConsumerAckFCRequiresMaxAckPendingErr,
    "JSConsumerAckFCRequiresNoAckWaitErr": JSConsumerAckFCRequiresNoAckWaitErr,
    "JSConsumerAckFCRequiresNoMaxDeliverErr": JSConsumerAckFCRequiresNoMaxDeliverErr,
    "JSConsumerAckFCRequiresPushErr": JSConsumerAckFCRequiresPushErr,
    "JSConsumerAckPolicyInvalidErr": JSConsumerAckPolicyInvalidErr,
    "JSConsumerAckWaitNegativeErr": JSConsumerAckWaitNegativeErr,
    "JSConsumerAlreadyExists": JSConsumerAlreadyExists,
    "JSConsumerBackOffNegativeErr": JSConsumerBackOffNegativeErr,
    "JSConsumerBadDurableNameErr": JSConsumerBadDurableNameErr,
    "JSConsumerConfigRequiredErr": JSConsumerConfigRequiredErr,
    "JSConsumerCreateDurableAndNameMismatch": JSConsumerCreateDurableAndNameMismatch,
    "JSConsumerCreateErrF": JSConsumerCreateErrF,
    "JSConsumerCreateFilterSubjectMismatchErr": JSConsumerCreateFilterSubjectMismatchErr,
    "JSConsumerDeliverCycleErr": JSConsumerDeliverCycleErr,
    "JSConsumerDeliverToWildcardsErr": JSConsumerDeliverToWildcardsErr,
    "JSConsumerDescriptionTooLongErrF": JSConsumerDescriptionTooLongErrF,
    "JSConsumerDirectRequiresEphemeralErr": JSConsumerDirectRequiresEphemeralErr,
    "JSConsumerDirectRequiresPushErr": JSConsumerDirectRequiresPushErr,
    "JSConsumerDoesNotExist": JSConsumerDoesNotExist,
    "JSConsumerDuplicateFilterSubjects": JSConsumerDuplicateFilterSubjects,
    "JSConsumerDurableNameNotInSubjectErr": JSConsumerDurableNameNotInSubjectErr,
    "JSConsumerDurableNameNotMatchSubjectErr": JSConsumerDurableNameNotMatchSubjectErr,
    "JSConsumerDurableNameNotSetErr": JSConsumerDurableNameNotSetErr,
    "JSConsumerEmptyFilter": JSConsumerEmptyFilter,
    "JSConsumerEmptyGroupName": JSConsumerEmptyGroupName,
    "JSConsumerEphemeralWithDurableInSubjectErr": JSConsumerEphemeralWithDurableInSubjectErr,
    "JSConsumerEphemeralWithDurableNameErr": JSConsumerEphemeralWithDurableNameErr,
    "JSConsumerExistingActiveErr": JSConsumerExistingActiveErr,
    "JSConsumerFCRequiresPushErr": JSConsumerFCRequiresPushErr,
    "JSConsumerFilterNotSubsetErr": JSConsumerFilterNotSubsetErr,
    "JSConsumerHBRequiresPushErr": JSConsumerHBRequiresPushErr,
    "JSConsumerInactiveThresholdExcess": JSConsumerInactiveThresholdExcess,
    "JSConsumerInvalidDeliverSubject": JSConsumerInvalidDeliverSubject,
    "JSConsumerInvalidGroupNameErr": JSConsumerInvalidGroupNameErr,
    "JSConsumerInvalidPolicyErrF": JSConsumerInvalidPolicyErrF,
    "JSConsumerInvalidPriorityGroupErr": JSConsumerInvalidPriorityGroupErr,
    "JSConsumerInvalidResetErr": JSConsumerInvalidResetErr,
    "JSConsumerInvalidSamplingErrF": JSConsumerInvalidSamplingErrF,
    "JSConsumerMaxDeliverBackoffErr": JSConsumerMaxDeliverBackoffErr,
    "JSConsumerMaxPendingAckExcessErrF": JSConsumerMaxPendingAckExcessErrF,
    "JSConsumerMaxPendingAckPolicyRequiredErr": JSConsumerMaxPendingAckPolicyRequiredErr,
    "JSConsumerMaxRequestBatchExceededF": JSConsumerMaxRequestBatchExceededF,
    "JSConsumerMaxRequestBatchNegativeErr": JSConsumerMaxRequestBatchNegativeErr,
    "JSConsumerMaxRequestExpiresTooSmall": JSConsumerMaxRequestExpiresTooSmall,
    "JSConsumerMaxWaitingNegativeErr": JSConsumerMaxWaitingNegativeErr,
    "JSConsumerMetadataLengthErrF": JSConsumerMetadataLengthErrF,
    "JSConsumerMultipleFiltersNotAllowed": JSConsumerMultipleFiltersNotAllowed,
    "JSConsumerNameContainsPathSeparatorsErr": JSConsumerNameContainsPathSeparatorsErr,
    "JSConsumerNameExistErr": JSConsumerNameExistErr,
    "JSConsumerNameTooLongErrF": JSConsumerNameTooLongErrF,
    "JSConsumerNotFoundErr": JSConsumerNotFoundErr,
    "JSConsumerOfflineErr": JSConsumerOfflineErr,
    "JSConsumerOfflineReasonErrF": JSConsumerOfflineReasonErrF,
    "JSConsumerOnMappedErr": JSConsumerOnMappedErr,
    "JSConsumerOverlappingSubjectFilters": JSConsumerOverlappingSubjectFilters,
    "JSConsumerPinnedTTLWithoutPriorityPolicyNone": JSConsumerPinnedTTLWithoutPriorityPolicyNone,
    "JSConsumerPriorityGroupWithPolicyNone": JSConsumerPriorityGroupWithPolicyNone,
    "JSConsumerPriorityPolicyWithoutGroup": JSConsumerPriorityPolicyWithoutGroup,
    "JSConsumerPullNotDurableErr": JSConsumerPullNotDurableErr,
    "JSConsumerPullRequiresAckErr": JSConsumerPullRequiresAckErr,
    "JSConsumerPullWithRateLimitErr": JSConsumerPullWithRateLimitErr,
    "JSConsumerPushMaxWaitingErr": JSConsumerPushMaxWaitingErr,
    "JSConsumerPushWithPriorityGroupErr": JSConsumerPushWithPriorityGroupErr,
    "JSConsumerReplacementWithDifferentNameErr": JSConsumerReplacementWithDifferentNameErr,
    "JSConsumerReplayPolicyInvalidErr": JSConsumerReplayPolicyInvalidErr,
    "JSConsumerReplicasExceedsStream": JSConsumerReplicasExceedsStream,
    "JSConsumerReplicasShouldMatchStream": JSConsumerReplicasShouldMatchStream,
    "JSConsumerSmallHeartbeatErr": JSConsumerSmallHeartbeatErr,
    "JSConsumerStoreFailedErrF": JSConsumerStoreFailedErrF,
    "JSConsumerStreamIdentityMismatchF": JSConsumerStreamIdentityMismatchF,
    "JSConsumerWQConsumerNotDeliverAllErr": JSConsumerWQConsumerNotDeliverAllErr,
    "JSConsumerWQConsumerNotUniqueErr": JSConsumerWQConsumerNotUniqueErr,
    "JSConsumerWQMultipleUnfilteredErr": JSConsumerWQMultipleUnfilteredErr,
    "JSConsumerWQRequiresExplicitAckErr": JSConsumerWQRequiresExplicitAckErr,
    "JSConsumerWithFlowControlNeedsHeartbeats": JSConsumerWithFlowControlNeedsHeartbeats,
    "JSInsufficientResourcesErr": JSInsufficientResourcesErr,
    "JSInvalidJSONErr": JSInvalidJSONErr,
    "JSMaximumConsumersLimitErr": JSMaximumConsumersLimitErr,
    "JSMaximumStreamsLimitErr": JSMaximumStreamsLimitErr,
    "JSMemoryResourcesExceededErr": JSMemoryResourcesExceededErr,
    "JSMessageCounterBrokenErr": JSMessageCounterBrokenErr,
    "JSMessageIncrDisabledErr": JSMessageIncrDisabledErr,
    "JSMessageIncrInvalidErr": JSMessageIncrInvalidErr,
    "JSMessageIncrMissingErr": JSMessageIncrMissingErr,
    "JSMessageIncrPayloadErr": JSMessageIncrPayloadErr,
    "JSMessageSchedulesDisabledErr": JSMessageSchedulesDisabledErr,
    "JSMessageSchedulesPatternInvalidErr": JSMessageSchedulesPatternInvalidErr,
    "JSMessageSchedulesRollupInvalidErr": JSMessageSchedulesRollupInvalidErr,
    "JSMessageSchedulesSchedulerInvalidErr": JSMessageSchedulesSchedulerInvalidErr,
    "JSMessageSchedulesSourceInvalidErr": JSMessageSchedulesSourceInvalidErr,
    "JSMessageSchedulesTTLInvalidErr": JSMessageSchedulesTTLInvalidErr,
    "JSMessageSchedulesTargetInvalidErr": JSMessageSchedulesTargetInvalidErr,
    "JSMessageSchedulesTimeZoneInvalidErr": JSMessageSchedulesTimeZoneInvalidErr,
    "JSMessageSourceHdrNotAllowedErr": JSMessageSourceHdrNotAllowedErr,
    "JSMessageTTLDisabledErr": JSMessageTTLDisabledErr,
    "JSMessageTTLInvalidErr": JSMessageTTLInvalidErr,
    "JSMirrorConsumerRequiresAckFCErr": JSMirrorConsumerRequiresAckFCErr,
    "JSMirrorConsumerSetupFailedErrF": JSMirrorConsumerSetupFailedErrF,
    "JSMirrorDurableConsumerCfgInvalid": JSMirrorDurableConsumerCfgInvalid,
    "JSMirrorInvalidStreamName": JSMirrorInvalidStreamName,
    "JSMirrorInvalidSubjectFilter": JSMirrorInvalidSubjectFilter,
    "JSMirrorInvalidTransformDestination": JSMirrorInvalidTransformDestination,
    "JSMirrorMaxMessageSizeTooBigErr": JSMirrorMaxMessageSizeTooBigErr,
    "JSMirrorMultipleFiltersNotAllowed": JSMirrorMultipleFiltersNotAllowed,
    "JSMirrorOverlappingSubjectFilters": JSMirrorOverlappingSubjectFilters,
    "JSMirrorWithAtomicPublishErr": JSMirrorWithAtomicPublishErr,
    "JSMirrorWithBatchPublishErr": JSMirrorWithBatchPublishErr,
    "JSMirrorWithCountersErr": JSMirrorWithCountersErr,
    "JSMirrorWithFirstSeqErr": JSMirrorWithFirstSeqErr,
    "JSMirrorWithMsgSchedulesErr": JSMirrorWithMsgSchedulesErr,
    "JSMirrorWithSourcesErr": JSMirrorWithSourcesErr,
    "JSMirrorWithStartSeqAndTimeErr": JSMirrorWithStartSeqAndTimeErr,
    "JSMirrorWithSubjectFiltersErr": JSMirrorWithSubjectFiltersErr,
    "JSMirrorWithSubjectsErr": JSMirrorWithSubjectsErr,
    "JSNoAccountErr": JSNoAccountErr,
    "JSNoLimitsErr": JSNoLimitsErr,
    "JSNoMessageFoundErr": JSNoMessageFoundErr,
    "JSNotEmptyRequestErr": JSNotEmptyRequestErr,
    "JSNotEnabledErr": JSNotEnabledErr,
    "JSNotEnabledForAccountErr": JSNotEnabledForAccountErr,
    "JSPedanticErrF": JSPedanticErrF,
    "JSPeerRemapErr": JSPeerRemapErr,
    "JSRaftGeneralErrF": JSRaftGeneralErrF,
    "JSReplicasCountCannotBeNegative": JSReplicasCountCannotBeNegative,
    "JSRequiredApiLevelErr": JSRequiredApiLevelErr,
    "JSRestoreSubscribeFailedErrF": JSRestoreSubscribeFailedErrF,
    "JSSequenceNotFoundErrF": JSSequenceNotFoundErrF,
    "JSSnapshotDeliverSubjectInvalidErr": JSSnapshotDeliverSubjectInvalidErr,
    "JSSourceConsumerRequiresAckFCErr": JSSourceConsumerRequiresAckFCErr,
    "JSSourceConsumerSetupFailedErrF": JSSourceConsumerSetupFailedErrF,
    "JSSourceDuplicateDetected": JSSourceDuplicateDetected,
    "JSSourceDurableConsumerCfgInvalid": JSSourceDurableConsumerCfgInvalid,
    "JSSourceDurableConsumerDuplicateDetected": JSSourceDurableConsumerDuplicateDetected,
    "JSSourceInvalidStreamName": JSSourceInvalidStreamName,
    "JSSourceInvalidSubjectFilter": JSSourceInvalidSubjectFilter,
    "JSSourceInvalidTransformDestination": JSSourceInvalidTransformDestination,
    "JSSourceMaxMessageSizeTooBigErr": JSSourceMaxMessageSizeTooBigErr,
    "JSSourceMultipleFiltersNotAllowed": JSSourceMultipleFiltersNotAllowed,
    "JSSourceOverlappingSubjectFilters": JSSourceOverlappingSubjectFilters,
    "JSSourceWithMsgSchedulesErr": JSSourceWithMsgSchedulesErr,
    "JSStorageResourcesExceededErr": JSStorageResourcesExceededErr,
    "JSStreamAssignmentErrF": JSStreamAssignmentErrF,
    "JSStreamCreateErrF": JSStreamCreateErrF,
    "JSStreamDeleteErrF": JSStreamDeleteErrF,
    "JSStreamDuplicateMessageConflict": JSStreamDuplicateMessageConflict,
    "JSStreamExpectedLastSeqPerSubjectInvalid": JSStreamExpectedLastSeqPerSubjectInvalid,
    "JSStreamExpectedLastSeqPerSubjectNotReady": JSStreamExpectedLastSeqPerSubjectNotReady,
    "JSStreamExternalApiOverlapErrF": JSStreamExternalApiOverlapErrF,
    "JSStreamExternalDelPrefixOverlapsErrF": JSStreamExternalDelPrefixOverlapsErrF,
    "JSStreamGeneralErrorF": JSStreamGeneralErrorF,
    "JSStreamHeaderExceedsMaximumErr": JSStreamHeaderExceedsMaximumErr,
    "JSStreamInfoMaxSubjectsErr": JSStreamInfoMaxSubjectsErr,
    "JSStreamInvalidConfigF": JSStreamInvalidConfigF,
    "JSStreamInvalidErr": JSStreamInvalidErr,
    "JSStreamInvalidExternalDeliverySubjErrF": JSStreamInvalidExternalDeliverySubjErrF,
    "JSStreamLimitsErrF": JSStreamLimitsErrF,
    "JSStreamMaxBytesRequired": JSStreamMaxBytesRequired,
    "JSStreamMaxStreamBytesExceeded": JSStreamMaxStreamBytesExceeded,
    "JSStreamMessageExceedsMaximumErr": JSStreamMessageExceedsMaximumErr,
    "JSStreamMinLastSeqErr": JSStreamMinLastSeqErr,
    "JSStreamMirrorNotUpdatableErr": JSStreamMirrorNotUpdatableErr,
    "JSStreamMismatchErr": JSStreamMismatchErr,
    "JSStreamMoveAndScaleErr": JSStreamMoveAndScaleErr,
    "JSStreamMoveInProgressErr": JSStreamMoveInProgressErr,
    "JSStreamMsgDeleteFailedF": JSStreamMsgDeleteFailedF,
    "JSStreamNameContainsPathSeparatorsErr": JSStreamNameContainsPathSeparatorsErr,
    "JSStreamNameExistErr": JSStreamNameExistErr,
    "JSStreamNameExistRestoreFailedErr": JSStreamNameExistRestoreFailedErr,
    "JSStreamNotFoundErr": JSStreamNotFoundErr,
    "JSStreamNotMatchErr": JSStreamNotMatchErr,
    "JSStreamOfflineErr": JSStreamOfflineErr,
    "JSStreamOfflineReasonErrF": JSStreamOfflineReasonErrF,
    "JSStreamPurgeFailedF": JSStreamPurgeFailedF,
    "JSStreamReconfigureInProgressErr": JSStreamReconfigureInProgressErr,
    "JSStreamReconfigureNotInProgressErr": JSStreamReconfigureNotInProgressErr,
    "JSStreamReplicasNotSupportedErr": JSStreamReplicasNotSupportedErr,
    "JSStreamReplicasNotUpdatableErr": JSStreamReplicasNotUpdatableErr,
    "JSStreamRestoreErrF": JSStreamRestoreErrF,
    "JSStreamRollupFailedF": JSStreamRollupFailedF,
    "JSStreamSealedErr": JSStreamSealedErr,
    "JSStreamSequenceNotMatchErr": JSStreamSequenceNotMatchErr,
    "JSStreamSnapshotErrF": JSStreamSnapshotErrF,
    "JSStreamStoreFailedF": JSStreamStoreFailedF,
    "JSStreamSubjectOverlapErr": JSStreamSubjectOverlapErr,
    "JSStreamTemplateCreateErrF": JSStreamTemplateCreateErrF,
    "JSStreamTemplateDeleteErrF": JSStreamTemplateDeleteErrF,
    "JSStreamTemplateNotFoundErr": JSStreamTemplateNotFoundErr,
    "JSStreamTooManyRequests": JSStreamTooManyRequests,
    "JSStreamTransformInvalidDestination": JSStreamTransformInvalidDestination,
    "JSStreamTransformInvalidSource": JSStreamTransformInvalidSource,
    "JSStreamUpdateErrF": JSStreamUpdateErrF,
    "JSStreamWrongLastMsgIDErrF": JSStreamWrongLastMsgIDErrF,
    "JSStreamWrongLastSequenceConstantErr": JSStreamWrongLastSequenceConstantErr,
    "JSStreamWrongLastSequenceErrF": JSStreamWrongLastSequenceErrF,
    "JSTempStorageFailedErr": JSTempStorageFailedErr,
    "JSTemplateNameNotMatchSubjectErr": JSTemplateNameNotMatchSubjectErr,
}
"""Every error by its nats-server constant name."""

BY_ERR_CODE: Final[dict[int, ErrorDef]] = {
    10002: JSAccountResourcesExceededErr,
    10003: JSBadRequestErr,
    10004: JSClusterIncompleteErr,
    10005: JSClusterNoPeersErrF,
    10006: JSClusterNotActiveErr,
    10007: JSClusterNotAssignedErr,
    10008: JSClusterNotAvailErr,
    10009: JSClusterNotLeaderErr,
    10010: JSClusterRequiredErr,
    10011: JSClusterTagsErr,
    10012: JSConsumerCreateErrF,
    10013: JSConsumerNameExistErr,
    10014: JSConsumerNotFoundErr,
    10015: JSSnapshotDeliverSubjectInvalidErr,
    10016: JSConsumerDurableNameNotInSubjectErr,
    10017: JSConsumerDurableNameNotMatchSubjectErr,
    10018: JSConsumerDurableNameNotSetErr,
    10019: JSConsumerEphemeralWithDurableInSubjectErr,
    10020: JSConsumerEphemeralWithDurableNameErr,
    10021: JSStreamExternalApiOverlapErrF,
    10022: JSStreamExternalDelPrefixOverlapsErrF,
    10023: JSInsufficientResourcesErr,
    10024: JSStreamInvalidExternalDeliverySubjErrF,
    10025: JSInvalidJSONErr,
    10026: JSMaximumConsumersLimitErr,
    10027: JSMaximumStreamsLimitErr,
    10028: JSMemoryResourcesExceededErr,
    10029: JSMirrorConsumerSetupFailedErrF,
    10030: JSMirrorMaxMessageSizeTooBigErr,
    10031: JSMirrorWithSourcesErr,
    10032: JSMirrorWithStartSeqAndTimeErr,
    10033: JSMirrorWithSubjectFiltersErr,
    10034: JSMirrorWithSubjectsErr,
    10035: JSNoAccountErr,
    10036: JSClusterUnSupportFeatureErr,
    10037: JSNoMessageFoundErr,
    10038: JSNotEmptyRequestErr,
    10039: JSNotEnabledForAccountErr,
    10040: JSClusterPeerNotMemberErr,
    10041: JSRaftGeneralErrF,
    10042: JSRestoreSubscribeFailedErrF,
    10043: JSSequenceNotFoundErrF,
    10044: JSClusterServerNotMemberErr,
    10045: JSSourceConsumerSetupFailedErrF,
    10046: JSSourceMaxMessageSizeTooBigErr,
    10047: JSStorageResourcesExceededErr,
    10048: JSStreamAssignmentErrF,
    10049: JSStreamCreateErrF,
    10050: JSStreamDeleteErrF,
    10051: JSStreamGeneralErrorF,
    10052: JSStreamInvalidConfigF,
    10053: JSStreamLimitsErrF,
    10054: JSStreamMessageExceedsMaximumErr,
    10055: JSStreamMirrorNotUpdatableErr,
    10056: JSStreamMismatchErr,
    10057: JSStreamMsgDeleteFailedF,
    10058: JSStreamNameExistErr,
    10059: JSStreamNotFoundErr,
    10060: JSStreamNotMatchErr,
    10061: JSStreamReplicasNotUpdatableErr,
    10062: JSStreamRestoreErrF,
    10063: JSStreamSequenceNotMatchErr,
    10064: JSStreamSnapshotErrF,
    10065: JSStreamSubjectOverlapErr,
    10066: JSStreamTemplateCreateErrF,
    10067: JSStreamTemplateDeleteErrF,
    10068: JSStreamTemplateNotFoundErr,
    10069: JSStreamUpdateErrF,
    10070: JSStreamWrongLastMsgIDErrF,
    10071: JSStreamWrongLastSequenceErrF,
    10072: JSTempStorageFailedErr,
    10073: JSTemplateNameNotMatchSubjectErr,
    10074: JSStreamReplicasNotSupportedErr,
    10075: JSPeerRemapErr,
    10076: JSNotEnabledErr,
    10077: JSStreamStoreFailedF,
    10078: JSConsumerConfigRequiredErr,
    10079: JSConsumerDeliverToWildcardsErr,
    10080: JSConsumerPushMaxWaitingErr,
    10081: JSConsumerDeliverCycleErr,
    10082: JSConsumerMaxPendingAckPolicyRequiredErr,
    10083: JSConsumerSmallHeartbeatErr,
    10084: JSConsumerPullRequiresAckErr,
    10085: JSConsumerPullNotDurableErr,
    10086: JSConsumerPullWithRateLimitErr,
    10087: JSConsumerMaxWaitingNegativeErr,
    10088: JSConsumerHBRequiresPushErr,
    10089: JSConsumerFCRequiresPushErr,
    10090: JSConsumerDirectRequiresPushErr,
    10091: JSConsumerDirectRequiresEphemeralErr,
    10092: JSConsumerOnMappedErr,
    10093: JSConsumerFilterNotSubsetErr,
    10094: JSConsumerInvalidPolicyErrF,
    10095: JSConsumerInvalidSamplingErrF,
    10096: JSStreamInvalidErr,
    10097: JSStreamHeaderExceedsMaximumErr,
    10098: JSConsumerWQRequiresExplicitAckErr,
    10099: JSConsumerWQMultipleUnfilteredErr,
    10100: JSConsumerWQConsumerNotUniqueErr,
    10101: JSConsumerWQConsumerNotDeliverAllErr,
    10102: JSConsumerNameTooLongErrF,
    10103: JSConsumerBadDurableNameErr,
    10104: JSConsumerStoreFailedErrF,
    10105: JSConsumerExistingActiveErr,
    10106: JSConsumerReplacementWithDifferentNameErr,
    10107: JSConsumerDescriptionTooLongErrF,
    10108: JSConsumerWithFlowControlNeedsHeartbeats,
    10109: JSStreamSealedErr,
    10110: JSStreamPurgeFailedF,
    10111: JSStreamRollupFailedF,
    10112: JSConsumerInvalidDeliverSubject,
    10113: JSStreamMaxBytesRequired,
    10114: JSConsumerMaxRequestBatchNegativeErr,
    10115: JSConsumerMaxRequestExpiresTooSmall,
    10116: JSConsumerMaxDeliverBackoffErr,
    10117: JSStreamInfoMaxSubjectsErr,
    10118: JSStreamOfflineErr,
    10119: JSConsumerOfflineErr,
    10120: JSNoLimitsErr,
    10121: JSConsumerMaxPendingAckExcessErrF,
    10122: JSStreamMaxStreamBytesExceeded,
    10123: JSStreamMoveAndScaleErr,
    10124: JSStreamMoveInProgressErr,
    10125: JSConsumerMaxRequestBatchExceededF,
    10126: JSConsumerReplicasExceedsStream,
    10127: JSConsumerNameContainsPathSeparatorsErr,
    10128: JSStreamNameContainsPathSeparatorsErr,
    10129: JSStreamReconfigureNotInProgressErr,
    10130: JSStreamNameExistRestoreFailedErr,
    10131: JSConsumerCreateFilterSubjectMismatchErr,
    10132: JSConsumerCreateDurableAndNameMismatch,
    10133: JSReplicasCountCannotBeNegative,
    10134: JSConsumerReplicasShouldMatchStream,
    10135: JSConsumerMetadataLengthErrF,
    10136: JSConsumerDuplicateFilterSubjects,
    10137: JSConsumerMultipleFiltersNotAllowed,
    10138: JSConsumerOverlappingSubjectFilters,
    10139: JSConsumerEmptyFilter,
    10140: JSSourceDuplicateDetected,
    10141: JSSourceInvalidStreamName,
    10142: JSMirrorInvalidStreamName,
    10143: JSMirrorWithFirstSeqErr,
    10144: JSSourceMultipleFiltersNotAllowed,
    10145: JSSourceInvalidSubjectFilter,
    10146: JSSourceInvalidTransformDestination,
    10147: JSSourceOverlappingSubjectFilters,
    10148: JSConsumerAlreadyExists,
    10149: JSConsumerDoesNotExist,
    10150: JSMirrorMultipleFiltersNotAllowed,
    10151: JSMirrorInvalidSubjectFilter,
    10152: JSMirrorOverlappingSubjectFilters,
    10153: JSConsumerInactiveThresholdExcess,
    10154: JSMirrorInvalidTransformDestination,
    10155: JSStreamTransformInvalidSource,
    10156: JSStreamTransformInvalidDestination,
    10157: JSPedanticErrF,
    10158: JSStreamDuplicateMessageConflict,
    10159: JSConsumerPriorityPolicyWithoutGroup,
    10160: JSConsumerInvalidPriorityGroupErr,
    10161: JSConsumerEmptyGroupName,
    10162: JSConsumerInvalidGroupNameErr,
    10163: JSStreamExpectedLastSeqPerSubjectNotReady,
    10164: JSStreamWrongLastSequenceConstantErr,
    10165: JSMessageTTLInvalidErr,
    10166: JSMessageTTLDisabledErr,
    10167: JSStreamTooManyRequests,
    10168: JSMessageIncrDisabledErr,
    10169: JSMessageIncrMissingErr,
    10170: JSMessageIncrPayloadErr,
    10171: JSMessageIncrInvalidErr,
    10172: JSMessageCounterBrokenErr,
    10173: JSMirrorWithCountersErr,
    10174: JSAtomicPublishDisabledErr,
    10175: JSAtomicPublishMissingSeqErr,
    10176: JSAtomicPublishIncompleteBatchErr,
    10177: JSAtomicPublishUnsupportedHeaderBatchErr,
    10178: JSConsumerPushWithPriorityGroupErr,
    10179: JSAtomicPublishInvalidBatchIDErr,
    10180: JSStreamMinLastSeqErr,
    10181: JSConsumerAckPolicyInvalidErr,
    10182: JSConsumerReplayPolicyInvalidErr,
    10183: JSConsumerAckWaitNegativeErr,
    10184: JSConsumerBackOffNegativeErr,
    10185: JSRequiredApiLevelErr,
    10186: JSMirrorWithMsgSchedulesErr,
    10187: JSSourceWithMsgSchedulesErr,
    10188: JSMessageSchedulesDisabledErr,
    10189: JSMessageSchedulesPatternInvalidErr,
    10190: JSMessageSchedulesTargetInvalidErr,
    10191: JSMessageSchedulesTTLInvalidErr,
    10192: JSMessageSchedulesRollupInvalidErr,
    10193: JSStreamExpectedLastSeqPerSubjectInvalid,
    10194: JSStreamOfflineReasonErrF,
    10195: JSConsumerOfflineReasonErrF,
    10196: JSConsumerPriorityGroupWithPolicyNone,
    10197: JSConsumerPinnedTTLWithoutPriorityPolicyNone,
    10198: JSMirrorWithAtomicPublishErr,
    10199: JSAtomicPublishTooLargeBatchErrF,
    10200: JSAtomicPublishInvalidBatchCommitErr,
    10201: JSAtomicPublishContainsDuplicateMessageErr,
    10202: JSClusterServerMemberChangeInflightErr,
    10203: JSMessageSchedulesSourceInvalidErr,
    10204: JSConsumerInvalidResetErr,
    10205: JSBatchPublishDisabledErr,
    10206: JSBatchPublishInvalidPatternErr,
    10207: JSBatchPublishInvalidBatchIDErr,
    10208: JSBatchPublishUnknownBatchIDErr,
    10209: JSMirrorWithBatchPublishErr,
    10210: JSAtomicPublishTooManyInflight,
    10211: JSBatchPublishTooManyInflight,
    10212: JSMessageSchedulesSchedulerInvalidErr,
    10213: JSMirrorDurableConsumerCfgInvalid,
    10214: JSMirrorConsumerRequiresAckFCErr,
    10215: JSSourceDurableConsumerCfgInvalid,
    10216: JSSourceDurableConsumerDuplicateDetected,
    10217: JSSourceConsumerRequiresAckFCErr,
    10218: JSConsumerAckFCRequiresPushErr,
    10219: JSConsumerAckFCRequiresFCErr,
    10220: JSConsumerAckFCRequiresMaxAckPendingErr,
    10221: JSConsumerAckFCRequiresNoAckWaitErr,
    10222: JSConsumerAckFCRequiresNoMaxDeliverErr,
    10223: JSMessageSchedulesTimeZoneInvalidErr,
    10224: JSClusterRescueErr,
    10225: JSConsumerStreamIdentityMismatchF,
    10226: JSStreamReconfigureInProgressErr,
    10227: JSMessageSourceHdrNotAllowedErr,
}
"""Every error by its ``err_code``."""
