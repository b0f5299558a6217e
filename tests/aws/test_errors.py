"""The one ClientError translator: SDK failures become port errors by error CODE, and the
resulting messages never carry request details. The errors are built in the exact shape botocore
produces for these service responses (no AWS service is called)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError

from fleetmem.adapters.aws.dynamo import translate_client_error
from fleetmem.errors import Conflict, TooLarge, Unavailable

SECRET = "fm_supersecrettokenvalue-in-the-request"


def client_error(code: str, message: str = "", op: str = "PutItem", **extra) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": message or f"{code} while handling {SECRET}"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **extra,
    }
    return ClientError(response, op)


@pytest.mark.parametrize(
    "code",
    [
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    ],
)
def test_throttling_becomes_unavailable_with_a_retry_hint(code):
    err = translate_client_error(client_error(code))
    assert isinstance(err, Unavailable)
    assert err.retry_after_seconds and err.retry_after_seconds > 0
    assert err.reason == "throttled"


def test_an_internal_server_error_is_a_retryable_outage():
    err = translate_client_error(client_error("InternalServerError"))
    assert isinstance(err, Unavailable) and err.retry_after_seconds


def test_a_failed_condition_is_a_conflict():
    assert isinstance(translate_client_error(client_error("ConditionalCheckFailedException")), Conflict)


def test_a_transaction_cancelled_by_a_condition_is_a_conflict():
    exc = client_error(
        "TransactionCanceledException",
        op="TransactWriteItems",
        CancellationReasons=[{"Code": "None"}, {"Code": "ConditionalCheckFailed"}],
    )
    assert isinstance(translate_client_error(exc), Conflict)


def test_a_transaction_cancelled_by_throttling_is_unavailable():
    exc = client_error(
        "TransactionCanceledException",
        op="TransactWriteItems",
        CancellationReasons=[{"Code": "ThrottlingError"}, {"Code": "None"}],
    )
    err = translate_client_error(exc)
    assert isinstance(err, Unavailable) and err.reason == "throttled"


def test_an_oversized_item_is_too_large():
    exc = client_error("ValidationException", "Item size has exceeded the maximum allowed size")
    assert isinstance(translate_client_error(exc), TooLarge)


def test_other_validation_errors_are_unavailable_not_too_large():
    exc = client_error("ValidationException", "One or more parameter values were invalid")
    err = translate_client_error(exc)
    assert isinstance(err, Unavailable) and not isinstance(err, TooLarge)


@pytest.mark.parametrize(
    "exc",
    [
        client_error("AccessDeniedException"),
        client_error("ResourceNotFoundException"),
        client_error("ValidationException", f"bad value {SECRET}"),
        EndpointConnectionError(endpoint_url=f"https://example.invalid/{SECRET}"),
        ParamValidationError(report=f"Invalid type for parameter {SECRET}"),
    ],
)
def test_no_translated_error_leaks_request_details(exc):
    err = translate_client_error(exc)
    assert isinstance(err, Unavailable | Conflict | TooLarge)
    assert SECRET not in str(err)
    assert "example.invalid" not in str(err)


def test_a_connection_failure_is_retryable():
    err = translate_client_error(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    assert isinstance(err, Unavailable) and err.retry_after_seconds
