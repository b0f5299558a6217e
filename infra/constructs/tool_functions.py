"""One Lambda function per memory verb (plus one for the page tools and one for the admin tools),
generated from the tool registry — nothing here lists the verbs by hand.

Each function's grants come from `ACCESS`: the tables it reads, the tables it writes, whether it
searches, embeds or calls the LLM. Reading verbs write no table; `delta` is the one reading verb
that writes, and only its session cursors (the at-least-once cursor is part of the verb). No tool
function writes the search index: the stream indexer alone does (a purged fact's REMOVE record
deletes its index entry; until then it cannot surface, because fact reads go to DynamoDB).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam

from constructs import Construct
from fleetmem.config import ENV_BEDROCK_LLM_MODEL, ENV_CORE_CHARS, ENV_LLM, ENV_QUOTE_CHECK
from fleetmem.lambda_routes import ADMIN_GROUP, PAGES_GROUP, function_name, groups

from ..config import DeployConfig
from .common import (
    PURGE_ACTIONS,
    READ_ACTIONS,
    RECEIPT_ACTIONS,
    WRITE_ACTIONS,
    Fn,
    FunctionFactory,
    grant_table,
    qualified_name,
)
from .search import Search
from .signing import InvokeSigning
from .tables import Tables


@dataclass(frozen=True)
class Access:
    read: frozenset[str] = frozenset()
    write: frozenset[str] = frozenset()
    search: bool = False
    embed: bool = False
    llm: bool = False
    purge: bool = False  # deletes facts outright (the admin purge tool)
    receipts: bool = False  # reads and cancels the caller's write receipts (D22)


def _a(read: str = "", write: str = "", **kw: bool) -> Access:
    return Access(frozenset(read.split()), frozenset(write.split()), **kw)


ACCESS: dict[str, Access] = {
    "recall": _a("facts pages", search=True, embed=True),
    "remember": _a("facts pages idempotency", "facts idempotency audit", search=True, embed=True),
    "entity": _a("facts pages", search=True, embed=True),
    "synthesize": _a("facts pages", search=True, embed=True, llm=True),
    "forget": _a("facts idempotency", "facts idempotency audit"),  # D22: forget is a keyed write
    "context_pack": _a("facts pages", search=True, embed=True),
    "delta": _a("facts pages cursors", "cursors"),
    PAGES_GROUP: _a("facts pages idempotency", "pages idempotency audit", search=True, embed=True),
    # trace_fact, purge_fact; list_facts and memory_stats (which also counts live cursors per client);
    # the account tools: tokens (clients), followers (cursors) and their pending changes; the write
    # receipt tools (idempotency: RECEIPT_ACTIONS); import_pack writes pages, facts and audit events
    ADMIN_GROUP: _a(
        "facts pages audit clients cursors idempotency", "facts pages audit clients", purge=True, receipts=True
    ),
}


def table_actions(access: Access, logical: str) -> set[str]:
    """The DynamoDB actions (without the `dynamodb:` prefix) `access` needs on one table."""
    out: set[str] = set()
    if logical in access.read:
        out |= set(READ_ACTIONS[logical])
    if logical in access.write:
        out |= set(WRITE_ACTIONS[logical])
        if access.purge:
            out |= set(PURGE_ACTIONS.get(logical, ()))
    if access.receipts:
        out |= set(RECEIPT_ACTIONS.get(logical, ()))
    return out


def registry_tools() -> list[str]:
    """Every tool name in the registry, the seven verbs first."""
    from fleetmem.memory.verbs import REGISTRY

    return list(REGISTRY)


def bedrock_model_arns(scope: Construct, model: str) -> list[str]:
    """A foundation model, or a cross-region inference profile ("eu.", "us.", ...) and the models
    it routes to."""
    from aws_cdk import Aws

    parts = model.split(".", 1)
    if len(parts) == 2 and parts[0] in {"us", "eu", "apac", "global", "ca", "jp", "au", "us-gov"}:
        return [
            f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}:{Aws.ACCOUNT_ID}:inference-profile/{model}",
            f"arn:{Aws.PARTITION}:bedrock:*::foundation-model/{parts[1]}",
        ]
    return [f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}::foundation-model/{model}"]


def grant_data(
    fn: Fn, access: Access, *, tables: Tables, search: Search, config: DeployConfig, scope: Construct
) -> None:
    for logical in sorted(access.read | access.write):
        grant_table(tables[logical], fn.role, sorted(table_actions(access, logical)))
    if access.search:
        search.grant_read(fn.role)
    if access.embed:
        fn.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["bedrock:InvokeModel"], resources=bedrock_model_arns(scope, config.embedding.model)
            )
        )
    if access.llm and config.llm.model:
        # The Converse API is authorised as bedrock:InvokeModel (there is no bedrock:Converse
        # action); synthesize does not stream, so InvokeModelWithResponseStream is not granted.
        fn.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=bedrock_model_arns(scope, config.llm.model))
        )


class ToolFunctions(Construct):
    """`by_group[group]` and `by_tool[tool]` give the `Fn`; `tool_function_names` is what the edge
    needs to route each tools/call."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        factory: FunctionFactory,
        tables: Tables,
        search: Search,
        signing: InvokeSigning,
    ) -> None:
        super().__init__(scope, id)
        self.tools_by_group = groups(registry_tools())
        self.by_group: dict[str, Fn] = {}
        self.by_tool: dict[str, Fn] = {}
        for group, tools in self.tools_by_group.items():
            access = ACCESS[group]
            env: dict[str, str] = dict(signing.env)
            if access.llm and config.llm.model:
                env |= {ENV_LLM: "bedrock", ENV_BEDROCK_LLM_MODEL: config.llm.model}
                env[ENV_QUOTE_CHECK] = "1" if config.llm.quote_check else "0"
            if "context_pack" in tools:
                env[ENV_CORE_CHARS] = str(config.memory.core_chars)
            fn = factory.make(
                self,
                group.title().replace("_", ""),
                group=group,
                handler=f"functions.{group}.handler.handler",
                description=f"fleetmem {', '.join(tools)}",
                env=env,
            )
            grant_data(fn, access, tables=tables, search=search, config=config, scope=self)
            signing.grant(fn.role)
            self.by_group[group] = fn
            for tool in tools:
                self.by_tool[tool] = fn
        # The edge invokes each tool's `live` alias (`<function>:live`), never the unqualified function.
        self.tool_function_names = {
            t: qualified_name(function_name(config.prefix, f.group)) for t, f in self.by_tool.items()
        }
