"""`PageStore.names` (D24, entity inference's one batched read), on every backend that provides
`pages`: the pages whose title key or an alias key is one of the keys asked, kept in step with
every put and delete."""

from __future__ import annotations

from tests.contract.builders import at, page

from fleetmem.memory.slugs import match_key
from fleetmem.ports.pages import NAME_KEYS_MAX


def _found(pages, tenant, *names: str, world_only: bool = True) -> set[tuple[str, str, str]]:
    keys = [match_key(n) for n in names]
    return {(k, m.page.slug, m.via) for k, m in pages.names(tenant, keys, world_only=world_only)}


def test_a_title_and_an_alias_are_found_by_their_keys(pages, tenant):
    pages.put(page(tenant, "people/alice-example", title="Alice Example", aliases=("Ally Ex", "A. Example")))
    got = _found(pages, tenant, "ALICE EXAMPLE", "ally ex", "nobody here")
    assert got == {
        ("alice example", "people/alice-example", "title"),
        ("ally ex", "people/alice-example", "alias"),
    }


def test_one_key_shared_by_two_pages_finds_both(pages, tenant):
    pages.put(page(tenant, "companies/orion", title="Orion"))
    pages.put(page(tenant, "projects/orion", title="Apollo", aliases=("Orion",)))
    assert _found(pages, tenant, "Orion") == {
        ("orion", "companies/orion", "title"),
        ("orion", "projects/orion", "alias"),
    }


def test_private_pages_are_left_out_for_world_only(pages, tenant):
    pages.put(page(tenant, "people/secret-sam", title="Secret Sam", visibility="private"))
    assert _found(pages, tenant, "Secret Sam") == set()
    assert _found(pages, tenant, "Secret Sam", world_only=False) == {("secret sam", "people/secret-sam", "title")}


def test_a_put_that_renames_and_a_delete_update_the_names(pages, tenant):
    pages.put(page(tenant, "people/bob", title="Bob Stone", aliases=("Bobby",)))
    pages.put(page(tenant, "people/bob", title="Robert Stone", aliases=("Rob",), updated_at=at(5)))
    assert _found(pages, tenant, "Bob Stone", "Bobby") == set()
    assert _found(pages, tenant, "Robert Stone", "Rob") == {
        ("robert stone", "people/bob", "title"),
        ("rob", "people/bob", "alias"),
    }
    pages.delete(tenant, "people/bob")
    assert _found(pages, tenant, "Robert Stone", "Rob") == set()


def test_another_tenants_pages_are_never_found(pages, tenant):
    pages.put(page(tenant + "x", "people/alice-example", title="Alice Example"))
    assert _found(pages, tenant, "Alice Example") == set()


def test_no_more_than_the_bound_of_keys_is_read(pages, tenant):
    pages.put(page(tenant, "companies/last", title="Last Key"))
    filler = [f"filler {i}" for i in range(NAME_KEYS_MAX)]
    assert _found(pages, tenant, *filler, "Last Key") == set()
    assert _found(pages, tenant, "Last Key", *filler) == {("last key", "companies/last", "title")}
