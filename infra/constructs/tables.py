"""DynamoDB tables, built from the one table definition the adapters and tests also use
(`fleetmem.adapters.aws.tables`), so a key or index can never drift between code and stack."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as ddb

from constructs import Construct
from fleetmem.wiring import TABLES, KeyAttr, TableSpec

from ..config import DeployConfig

_TYPES = {"S": ddb.AttributeType.STRING, "N": ddb.AttributeType.NUMBER, "B": ddb.AttributeType.BINARY}
_STREAMS = {
    "NEW_AND_OLD_IMAGES": ddb.StreamViewType.NEW_AND_OLD_IMAGES,
    "NEW_IMAGE": ddb.StreamViewType.NEW_IMAGE,
    "OLD_IMAGE": ddb.StreamViewType.OLD_IMAGE,
    "KEYS_ONLY": ddb.StreamViewType.KEYS_ONLY,
}


def _attr(k: KeyAttr) -> ddb.Attribute:
    return ddb.Attribute(name=k.name, type=_TYPES[k.type])


def _gsi(g) -> ddb.GlobalSecondaryIndexPropsV2:
    if isinstance(g.projection, tuple):
        projection = {"projection_type": ddb.ProjectionType.INCLUDE, "non_key_attributes": list(g.projection)}
    else:
        projection = {"projection_type": ddb.ProjectionType[g.projection]}
    return ddb.GlobalSecondaryIndexPropsV2(
        index_name=g.name,
        partition_key=_attr(g.partition),
        sort_key=_attr(g.sort) if g.sort else None,
        **projection,
    )


class Tables(Construct):
    """One on-demand `TableV2` per spec: PITR, TTL, streams and deletion protection per config."""

    def __init__(self, scope: Construct, id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id)
        self.prefix = config.prefix
        self.by_logical: dict[str, ddb.TableV2] = {}
        self.specs: dict[str, TableSpec] = {}
        for spec in TABLES:
            table = ddb.TableV2(
                self,
                spec.logical.capitalize(),
                table_name=spec.physical_name(config.prefix),
                partition_key=_attr(spec.partition),
                sort_key=_attr(spec.sort) if spec.sort else None,
                billing=ddb.Billing.on_demand(),
                global_secondary_indexes=[_gsi(g) for g in spec.gsis] or None,
                time_to_live_attribute=spec.ttl_attribute,
                dynamo_stream=_STREAMS[spec.stream] if spec.stream else None,
                point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=config.tables.point_in_time_recovery
                ),
                deletion_protection=config.tables.deletion_protection,
                removal_policy=(
                    cdk.RemovalPolicy.RETAIN if config.tables.retain_on_delete else cdk.RemovalPolicy.DESTROY
                ),
            )
            self.by_logical[spec.logical] = table
            self.specs[spec.logical] = spec

    def __getitem__(self, logical: str) -> ddb.TableV2:
        return self.by_logical[logical]

    @property
    def streamed(self) -> list[ddb.TableV2]:
        return [self.by_logical[n] for n, s in self.specs.items() if s.stream]
