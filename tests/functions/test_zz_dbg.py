import json
from tests.functions.test_edge_conformance import StreamPump
from tests.functions.conftest import make_deps
from tests.aws import engines
from fleetmem.adapters.local.clock import SystemClock
from fleetmem.models import Caller
from fleetmem.transport.dispatch import dispatch
from fleetmem.adapters.aws.stream import records_to_operations, embed_operations, apply_operations

def test_dbg(request, osmem_url):
    ep = engines.dynamodb_local_endpoint(request.config)
    prefix = engines.fresh_prefix()
    deps = make_deps(ep, osmem_url, SystemClock(), prefix=prefix)
    c = Caller(tenant="t", client_id="c", scopes=frozenset({"read","write"}))
    r = dispatch("remember", {"fact": "x is y", "provenance": "p"}, c, deps)
    print(r.body)
    pump = StreamPump(ep, prefix)
    for arn in pump.arns:
        for shard in pump.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            it = pump._iterator(arn, shard["ShardId"])
            out = pump.streams.get_records(ShardIterator=it)
            recs = json.loads(json.dumps(out["Records"], default=str))
            for rec in recs:
                print(rec["eventName"], json.dumps(rec["dynamodb"].get("Keys")))
                ops, bad = records_to_operations([rec])
                print(" ops", [(o.action, len(o.docs)) for o in ops], "bad", bad)
                ops, unemb = embed_operations(ops, deps.embedder)
                try:
                    for o in ops:
                        if o.action == "upsert": deps.search.upsert(list(o.docs))
                except Exception as e:
                    print(" EXC", type(e), e)
