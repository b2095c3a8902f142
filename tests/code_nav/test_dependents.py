"""find_dependents: package.json declarations with range checks, importers through barrels and re-exports."""

from __future__ import annotations

import pytest

from server.errors import InvalidArgument
from tools.code_nav.dependents import find_dependents
from tools.code_nav.semver import satisfies

CONTRACTS = "@volontariapp/contracts-nest"


@pytest.mark.parametrize(("version", "spec", "expected"), [
    ("2.3.0", "^2.1.0", True), ("2.3.0", "~1.4.2", False), ("1.4.9", "~1.4.2", True), ("1.5.0", "~1.4.2", False),
    ("0.2.5", "^0.2.0", True), ("0.3.0", "^0.2.0", False), ("0.0.3", "^0.0.3", True), ("0.0.4", "^0.0.3", False),
    ("1.5.0", ">=1.2 <2", True), ("2.0.0", ">=1.2 <2", False), ("1.9.0", "1.x", True), ("3.0.0", "1.x || 2.x", False),
    ("2.9.9", "1 - 2", True), ("3.0.0", "1 - 2", False), ("2.0.0", "*", True), ("2.0.0", "workspace:*", True),
    ("2.0.0", "workspace:^1.0.0", False), ("1.3.0-beta", "^1.2.0", False), ("1.2.0-beta.2", ">=1.2.0-beta.1", True),
    ("2.0.0", "latest", None), ("2.0.0", "file:../x", None), ("2.0.0", "github:a/b", None), ("2.0.0", ">= 2.0.0", True),
    # `>` of a partial version is `>=` the next one without a pre-release (npm); a leading `v` is a version
    ("1.3.0-beta.1", ">1.2", False), ("2.0.0-alpha", ">1", False), ("1.3.0", ">1.2", True), ("2.0.0", ">1", True),
    ("1.2.3", "v1.2.3", True), ("1.2.4", "v1.2.3", False),
])
def test_semver_ranges(version, spec, expected):
    assert satisfies(version, spec) is expected


def test_package_declarations_and_importers(nav_service):
    r = find_dependents(nav_service, CONTRACTS)
    assert r.resolved == "package" and r.version == "2.3.0"
    assert [(d.package, d.file, d.line, d.range, d.satisfied) for d in r.declaring] == [
        ("api-gateway", "api-gateway/package.json", 7, "^2.1.0", True),
        ("ms-notification", "ms-notification/package.json", 6, "~1.4.2", False)]
    assert any("excludes" in n for n in r.notes)
    assert {(i.file, i.line) for i in r.importers} == {
        ("api-gateway/src/events/events.gateway.service.ts", 4),
        ("api-gateway/src/notifications/notifications.client.ts", 2),
        ("ms-notification/src/controllers/notification.controller.ts", 3),  # a subpath import counts
        ("api-gateway/src/legacy/lazy-contracts.ts", 3)}  # so does import('...')
    with_tests = find_dependents(nav_service, CONTRACTS, include_tests=True)
    assert "api-gateway/test/events.controller.spec.ts" in {i.file for i in with_tests.importers}
    grouped = find_dependents(nav_service, CONTRACTS, granularity="package")
    assert [(p.package, p.files) for p in grouped.packages] == [("api-gateway", 3), ("ms-notification", 1)]
    assert grouped.importers == []
    dev = find_dependents(nav_service, "@volontariapp/messaging")
    assert ("ms-notification", "devDependencies", True) in {(d.package, d.section, d.satisfied) for d in dev.declaring}


def test_symbol_through_barrel_and_alias(nav_service):
    r = find_dependents(nav_service, "EventServiceClient", include_tests=True)
    assert r.resolved == "symbol"
    assert r.declared_at == "npm-packages/packages/contracts-nest/src/clients/event.client.ts:14"
    by_file = {i.file: i for i in r.importers}
    assert set(by_file) == {"api-gateway/src/events/events.gateway.service.ts",
                            "api-gateway/src/notifications/notifications.client.ts",
                            "api-gateway/test/events.controller.spec.ts"}
    assert by_file["api-gateway/src/notifications/notifications.client.ts"].names == ["EventsGrpcClient"]  # alias
    assert by_file["api-gateway/src/events/events.gateway.service.ts"].via == \
        "npm-packages/packages/contracts-nest/src/index.ts"
    star = find_dependents(nav_service, "NotificationServiceClient")  # through `export *` twice, and a subpath
    assert {i.file for i in star.importers} == {"api-gateway/src/notifications/notifications.client.ts",
                                                "ms-notification/src/controllers/notification.controller.ts"}


def test_file_target_paging_and_errors(nav_service):
    r = find_dependents(nav_service, "api-gateway/src/events/events.gateway.service.ts")
    assert r.resolved == "file" and [i.file for i in r.importers] == ["api-gateway/src/events/events.controller.ts"]
    page = find_dependents(nav_service, CONTRACTS, limit=1, offset=1)
    assert len(page.importers) == 1 and page.page.total == 4 and page.page.next_offset == 2
    with pytest.raises(InvalidArgument, match="no workspace package"):
        find_dependents(nav_service, "NoSuchThing")
    with pytest.raises(InvalidArgument, match="granularity"):
        find_dependents(nav_service, CONTRACTS, granularity="repo")
