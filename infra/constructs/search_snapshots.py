"""The managed search domain's manual snapshot repository (`search.snapshot_repository`): an S3
bucket and the role OpenSearch assumes to write it."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3

from constructs import Construct

from ..config import DeployConfig
from .common import acknowledge, arn_ref


def snapshot_repository(
    scope: Construct, config: DeployConfig, admin_role: iam.Role | None
) -> tuple[s3.Bucket, iam.Role]:
    """An S3 bucket for manual snapshots and the role OpenSearch assumes to write it. Kept when
    the stack is deleted: the snapshots are the backup."""
    bucket = s3.Bucket(
        scope,
        "SnapshotBucket",
        encryption=s3.BucketEncryption.S3_MANAGED,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        versioned=True,
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    acknowledge(
        bucket,
        "AwsSolutions-S1",
        "Only OpenSearch's snapshot role writes this bucket; CloudTrail records who registered or "
        "restored a snapshot, so server access logs would add a second bucket for no new facts.",
    )
    role = iam.Role(
        scope,
        "SnapshotRole",
        assumed_by=iam.ServicePrincipal("es.amazonaws.com"),
        description=f"{config.prefix}: OpenSearch writes and reads manual snapshots in its bucket",
    )
    arn = bucket.bucket_arn
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[arn]))
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources=[f"{arn}/*"])
    )
    if admin_role is not None:  # registering the repository passes the snapshot role
        admin_role.add_to_principal_policy(iam.PolicyStatement(actions=["iam:PassRole"], resources=[role.role_arn]))
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{arn_ref(bucket)}/*]",
        "OpenSearch names its snapshot objects itself: the role reads and writes objects of this one bucket only.",
    )
    return bucket, role
