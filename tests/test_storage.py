"""Media in the yui-media bucket: who may upload, read, sign, list and delete (reference §15.5).

A has alpha (served by HA) and loose (served by nobody); B has bravo (served by HB). Every
refusal comes from the database's policies, reached over HTTP as the real clients reach it.
"""

from __future__ import annotations

import hashlib
import http.client
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests

from relay.keys import mint
from tests.helpers.relay import Host, LocalRelay, Person, TwoPeople, two_people

# A valid 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e5273e0c0000000049454e44ae426082"
)
LIMIT = 52428800
STORAGE = "/storage/v1/object"
DENIED = (401, 403)
HIDDEN = (401, 403, 404)


@dataclass
class World(TwoPeople):
    photo: str  # A's photo in alpha's thread
    b_photo: str  # B's photo in bravo's thread


def media_path(person: Person | str, agent: dict[str, Any], side: str = "user") -> str:
    owner = person if isinstance(person, str) else person.id
    return f"{owner}/{agent['id']}/{side}/{uuid.uuid4()}.png"


def call(
    relay: LocalRelay,
    method: str,
    path: str,
    token: str | None,
    *,
    data: Any = None,
    json: Any = None,
    headers: dict[str, str] | None = None,
) -> requests.Response:
    sent = {"apikey": relay.anon_key, **(headers or {})}
    if token:
        sent["authorization"] = f"Bearer {token}"
    return requests.request(
        method, relay.url + STORAGE + path, data=data, json=json, headers=sent, timeout=120
    )


def upload(
    relay: LocalRelay,
    token: str | None,
    path: str,
    data: Any = PNG,
    mime: str = "image/png",
    **extra: str,
) -> requests.Response:
    headers = {"content-type": mime, **extra}
    return call(relay, "POST", f"/yui-media/{path}", token, data=data, headers=headers)


def read(relay: LocalRelay, token: str | None, path: str) -> requests.Response:
    return call(relay, "GET", f"/authenticated/yui-media/{path}", token)


def sign(relay: LocalRelay, token: str | None, path: str, seconds: int = 60) -> requests.Response:
    return call(relay, "POST", f"/sign/yui-media/{path}", token, json={"expiresIn": seconds})


def listing(relay: LocalRelay, token: str, prefix: str) -> list[str]:
    answer = call(relay, "POST", "/list/yui-media", token, json={"prefix": prefix, "limit": 100})
    assert answer.status_code == 200, answer.text
    return [entry["name"] for entry in answer.json()]


def delete(relay: LocalRelay, token: str | None, *paths: str) -> requests.Response:
    return call(relay, "DELETE", "/yui-media", token, json={"prefixes": list(paths)})


def stored(relay: LocalRelay, path: str) -> bool:
    return bool(relay.sql("select 1 from storage.objects where name = %s", (path,)))


def media_dir(relay: LocalRelay) -> Path:
    return Path(relay.home) / "relay" / "media"


def files_on_disk(relay: LocalRelay) -> set[str]:
    return {p.name for p in media_dir(relay).iterdir() if p.is_file()}


def rpc(relay: LocalRelay, name: str, token: str, **args: Any) -> requests.Response:
    return relay.rest("POST", f"rpc/{name}", token, body=args)


def ok_upload(relay: LocalRelay, token: str, path: str) -> None:
    answer = upload(relay, token, path)
    assert answer.status_code == 200, answer.text
    assert answer.json()["Key"] == f"yui-media/{path}"


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> World:
    cast = two_people(relay)
    photo, b_photo = media_path(cast.a, cast.alpha), media_path(cast.b, cast.bravo)
    ok_upload(relay, cast.a.token, photo)
    ok_upload(relay, cast.b.token, b_photo)
    return World(**vars(cast), photo=photo, b_photo=b_photo)


# --- the bucket ----------------------------------------------------------------------------


def test_the_bucket_is_private_with_its_limits(relay: LocalRelay) -> None:
    [(public, size, types)] = relay.sql(
        "select public, file_size_limit, allowed_mime_types from storage.buckets"
        " where id = 'yui-media'"
    )
    assert (public, size) == (False, LIMIT)
    assert set(types) == {
        *("image/jpeg", "image/png", "image/webp", "image/gif", "image/heic"),
        *("video/mp4", "video/quicktime", "audio/mp4", "audio/midi"),
    }
    roles = relay.sql("select roles from pg_policies where policyname like 'yui_media%'")
    assert roles and all(set(r) <= {"yui_user", "yui_connector"} for (r,) in roles)


def test_bytes_live_in_private_files_named_by_id(world: World) -> None:
    [(object_id, digest, role)] = world.relay.sql(
        "select id::text, sha256, owner_role from storage.objects where name = %s", (world.photo,)
    )
    assert digest == hashlib.sha256(PNG).hexdigest() and role == "yui_user"
    assert media_dir(world.relay).stat().st_mode & 0o777 == 0o700
    on_disk = media_dir(world.relay) / object_id
    assert on_disk.read_bytes() == PNG and on_disk.stat().st_mode & 0o777 == 0o600


# --- the person ----------------------------------------------------------------------------


def test_person_reads_and_signs_their_photo(world: World) -> None:
    relay = world.relay
    answer = read(relay, world.a.token, world.photo)
    assert answer.status_code == 200 and answer.content == PNG
    assert answer.headers["content-type"] == "image/png"
    plain = call(relay, "GET", f"/yui-media/{world.photo}", world.a.token)
    assert plain.status_code == 200 and plain.content == PNG
    signed = sign(relay, world.a.token, world.photo)
    assert signed.status_code == 200, signed.text
    url = signed.json()["signedURL"]
    assert url.startswith(f"/object/sign/yui-media/{world.photo}?token=")
    fetched = requests.get(relay.url + "/storage/v1" + url, timeout=20)
    assert fetched.status_code == 200 and fetched.content == PNG
    part = requests.get(relay.url + "/storage/v1" + url, headers={"range": "bytes=0-3"}, timeout=20)
    assert part.status_code == 206 and part.content == PNG[:4]


def test_a_signed_url_stops_at_its_expiry(world: World) -> None:
    url = sign(world.relay, world.a.token, world.photo, seconds=1).json()["signedURL"]
    assert requests.get(world.relay.url + "/storage/v1" + url, timeout=20).status_code == 200
    time.sleep(2.2)
    expired = requests.get(world.relay.url + "/storage/v1" + url, timeout=20)
    assert expired.status_code in (400, 401) and expired.content != PNG
    assert expired.json()["error"] == "InvalidJWT"


def test_a_signed_url_serves_only_its_own_path(world: World) -> None:
    url = sign(world.relay, world.a.token, world.photo).json()["signedURL"]
    token = url.split("token=", 1)[1]
    other = f"{world.relay.url}/storage/v1/object/sign/yui-media/{world.b_photo}?token={token}"
    assert requests.get(other, timeout=20).status_code in (400, 401)
    forged = jwt.encode(
        {"url": f"yui-media/{world.photo}", "exp": int(time.time()) + 60}, "x" * 40, "HS256"
    )
    path = f"/storage/v1/object/sign/yui-media/{world.photo}"
    for bad in (forged, world.a.token, ""):
        answer = requests.get(world.relay.url + path, params={"token": bad}, timeout=20)
        assert answer.status_code in (400, 401)


def test_person_may_upload_into_their_agent_that_no_host_serves(world: World) -> None:
    path = media_path(world.a, world.loose)
    ok_upload(world.relay, world.a.token, path)
    assert read(world.relay, world.a.token, path).content == PNG


PERSON_REFUSED = ("as the agent", "into B's thread", "into B's folder", "no agent", "..", "../..")


@pytest.mark.parametrize("where", PERSON_REFUSED)
def test_person_cannot_upload_outside_their_own_photos(world: World, where: str) -> None:
    a, b, alpha = world.a, world.b, world.alpha
    name = f"{uuid.uuid4()}.png"
    path = {
        "as the agent": media_path(a, alpha, "agent"),
        "into B's thread": media_path(a, world.bravo),
        "into B's folder": media_path(b, alpha),
        "no agent": f"{a.id}/user/{name}",
        # percent-encoded: a client folds literal dot segments away before they are sent
        "..": f"{a.id}/{alpha['id']}/user/%2E%2E",
        "../..": f"{a.id}/{alpha['id']}/user/%2E%2E/%2E%2E/{b.id}/{world.bravo['id']}/{name}",
    }[where]
    answer = upload(world.relay, a.token, path)
    assert answer.status_code == 403, answer.text
    assert answer.json()["statusCode"] == "403"
    assert not stored(world.relay, path.replace("%2E", "."))


def test_nothing_is_overwritten(world: World) -> None:
    relay, token = world.relay, world.a.token
    again = upload(relay, token, world.photo, data=b"\x89PNG other")
    assert again.status_code == 409 and again.json()["error"] == "Duplicate"
    assert upload(relay, token, world.photo, data=b"x", **{"x-upsert": "true"}).status_code == 403
    put = call(relay, "PUT", f"/yui-media/{world.photo}", token, data=b"x")
    assert put.status_code == 403
    fresh = media_path(world.a, world.alpha)
    assert upload(relay, token, fresh, **{"x-upsert": "true"}).status_code == 403
    assert not stored(relay, fresh)
    assert read(relay, token, world.photo).content == PNG


@pytest.mark.parametrize("mime", ["text/plain", "text/html", "image/svg+xml", "video/webm"])
def test_only_media_types_are_stored(world: World, mime: str) -> None:
    path = media_path(world.a, world.alpha)
    answer = upload(world.relay, world.a.token, path, data=b"<svg/>", mime=mime)
    assert answer.status_code in (400, 415) and answer.json()["error"] == "invalid_mime_type"
    assert not stored(world.relay, path)


@pytest.mark.parametrize("bucket_limit", [LIMIT, None])  # a bucket without one: the gateway's
def test_fifty_megabytes_and_one_byte_is_refused_and_leaves_nothing(
    world: World, bucket_limit: int | None
) -> None:
    relay = world.relay
    before = files_on_disk(relay)
    block = b"\0" * (1 << 20)

    def body() -> Iterator[bytes]:
        for _ in range(LIMIT // len(block)):
            yield block
        yield b"\0"

    path = media_path(world.a, world.alpha)
    relay.sql(
        "update storage.buckets set file_size_limit = %s where id = 'yui-media'", (bucket_limit,)
    )
    try:
        answer = upload(relay, world.a.token, path, data=body())
    finally:
        relay.sql(
            "update storage.buckets set file_size_limit = %s where id = 'yui-media'", (LIMIT,)
        )
    assert answer.status_code == 413 and answer.json()["statusCode"] == "413"
    assert not stored(relay, path)
    assert files_on_disk(relay) == before
    assert not any((media_dir(relay) / ".tmp").iterdir())


def test_a_declared_oversize_body_is_refused_before_it_is_sent(world: World) -> None:
    host, port = world.relay.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        connection.putrequest("POST", f"{STORAGE}/yui-media/{media_path(world.a, world.alpha)}")
        for header, value in (
            ("authorization", f"Bearer {world.a.token}"),
            ("content-type", "image/png"),
            ("content-length", str(LIMIT + 1)),
        ):
            connection.putheader(header, value)
        connection.endheaders()
        assert connection.getresponse().status == 413
    finally:
        connection.close()


def test_person_cannot_touch_someone_elses_media(world: World) -> None:
    relay, a = world.relay, world.a
    assert read(relay, a.token, world.b_photo).status_code == 404
    assert sign(relay, a.token, world.b_photo).status_code == 404
    assert listing(relay, a.token, f"{world.b.id}/{world.bravo['id']}/user") == []
    answer = delete(relay, a.token, world.b_photo)
    assert answer.status_code == 200 and answer.json() == []
    assert stored(relay, world.b_photo)


def test_person_lists_their_own_folders(world: World) -> None:
    relay, a = world.relay, world.a
    assert world.alpha["id"] in listing(relay, a.token, a.id)
    names = listing(relay, a.token, f"{a.id}/{world.alpha['id']}/user/")
    assert world.photo.rsplit("/", 1)[1] in names


def test_person_deletes_their_own_photo(world: World) -> None:
    relay, a = world.relay, world.a
    path = media_path(a, world.alpha)
    ok_upload(relay, a.token, path)
    [(object_id,)] = relay.sql("select id::text from storage.objects where name = %s", (path,))
    answer = delete(relay, a.token, path)
    assert answer.status_code == 200 and [o["name"] for o in answer.json()] == [path]
    assert read(relay, a.token, path).status_code == 404
    assert object_id not in files_on_disk(relay)


def test_a_suspended_person_cannot_upload(relay: LocalRelay) -> None:
    person = relay.person("Suspended")
    agent, _ = person.add_agent("Agent")
    relay.sql("select yui_suspend('user', %s, true, 'abuse')", (person.id,))
    try:
        assert upload(relay, person.token, media_path(person, agent)).status_code == 403
    finally:
        relay.sql("select yui_suspend('user', %s, false)", (person.id,))


def test_the_daily_quota_counts_each_side(relay: LocalRelay) -> None:
    person = relay.person("Busy")
    agent, code = person.add_agent("Agent")
    host = Host.pair(relay, code, "busy")
    relay.sql("update yui_limits set value = 2 where name = 'media_uploads_per_day'")
    try:
        for _ in range(2):
            ok_upload(relay, person.token, media_path(person, agent))
        assert upload(relay, person.token, media_path(person, agent)).status_code == 403
        ok_upload(relay, host.jwt, media_path(person, agent, "agent"))
    finally:
        relay.sql("update yui_limits set value = 1000 where name = 'media_uploads_per_day'")


# --- the host ------------------------------------------------------------------------------


def test_host_uploads_as_its_agent_and_the_person_reads_it(world: World) -> None:
    relay = world.relay
    path = media_path(world.a, world.alpha, "agent")
    ok_upload(relay, world.ha.jwt, path)
    assert relay.sql("select owner_role from storage.objects where name = %s", (path,)) == [
        ("yui_connector",)
    ]
    signed = sign(relay, world.ha.jwt, path, seconds=7 * 24 * 3600)
    assert signed.status_code == 200 and "token=" in signed.json()["signedURL"]
    assert read(relay, world.a.token, path).content == PNG


def test_host_reads_the_persons_photo_in_its_thread(world: World) -> None:
    answer = read(world.relay, world.ha.jwt, world.photo)
    assert answer.status_code == 200 and answer.content == PNG
    assert world.photo.rsplit("/", 1)[1] in listing(
        world.relay, world.ha.jwt, f"{world.a.id}/{world.alpha['id']}/user"
    )


def test_host_cannot_read_outside_the_threads_it_serves(world: World) -> None:
    relay = world.relay
    unserved = media_path(world.a, world.loose)
    ok_upload(relay, world.a.token, unserved)
    assert read(relay, world.ha.jwt, unserved).status_code == 404
    assert sign(relay, world.ha.jwt, unserved).status_code == 404
    assert listing(relay, world.ha.jwt, f"{world.a.id}/{world.loose['id']}/user") == []
    assert read(relay, world.ha.jwt, world.b_photo).status_code == 404
    assert read(relay, world.hb.jwt, world.photo).status_code == 404


@pytest.mark.parametrize("where", ["as the person", "into an unserved agent", "into B's thread"])
def test_host_uploads_only_as_the_agents_it_serves(world: World, where: str) -> None:
    path = {
        "as the person": media_path(world.a, world.alpha, "user"),
        "into an unserved agent": media_path(world.a, world.loose, "agent"),
        "into B's thread": media_path(world.b, world.bravo, "agent"),
    }[where]
    assert upload(world.relay, world.ha.jwt, path).status_code == 403
    assert not stored(world.relay, path)


def test_host_cannot_delete(world: World) -> None:
    answer = delete(world.relay, world.ha.jwt, world.photo)
    assert answer.status_code in DENIED
    assert stored(world.relay, world.photo)


def test_a_revoked_host_cannot_read_sign_or_upload(relay: LocalRelay) -> None:
    person = relay.person("Revoker")
    agent, code = person.add_agent("Agent")
    host = Host.pair(relay, code, "revoked")
    fetched, fresh = media_path(person, agent), media_path(person, agent)
    ok_upload(relay, person.token, fetched)
    assert read(relay, host.jwt, fetched).status_code == 200
    link = sign(relay, host.jwt, fetched).json()["signedURL"]
    revoked = relay.fn(
        "yui-agents", {"action": "connector_revoke", "id": host.connector["id"]}, person.token
    )
    assert revoked.status_code == 200
    ok_upload(relay, person.token, fresh)
    for path in (fetched, fresh):
        assert read(relay, host.jwt, path).status_code == 404
        assert sign(relay, host.jwt, path).status_code == 404
    assert upload(relay, host.jwt, media_path(person, agent, "agent")).status_code == 403
    # A link signed before the revocation is a bearer link until it expires.
    assert requests.get(relay.url + "/storage/v1" + link, timeout=20).content == PNG


# --- outsiders -----------------------------------------------------------------------------


def outsider_tokens(relay: LocalRelay, person: Person) -> dict[str, str | None]:
    claims = {"role": "yui_user", "sub": person.id}
    return {
        "no token": None,
        "anon key": relay.anon_key,
        "forged": jwt.encode({**claims, "exp": int(time.time()) + 600}, "y" * 40, "HS256"),
        "authenticated": mint(relay.jwt_secret, {"role": "authenticated", "sub": person.id}),
    }


@pytest.mark.parametrize("who", ["no token", "anon key", "forged", "authenticated"])
def test_outsiders_cannot_read_upload_sign_or_list(world: World, who: str) -> None:
    relay = world.relay
    token = outsider_tokens(relay, world.a)[who]
    assert read(relay, token, world.photo).status_code in HIDDEN
    assert sign(relay, token, world.photo).status_code in HIDDEN
    path = media_path(world.a, world.alpha)
    assert upload(relay, token, path).status_code in DENIED
    assert not stored(relay, path)
    body = {"prefix": world.a.id}
    assert call(relay, "POST", "/list/yui-media", token, json=body).status_code in DENIED
    assert delete(relay, token, world.photo).status_code in DENIED
    assert stored(relay, world.photo)


def test_there_is_no_public_url(world: World) -> None:
    answer = call(world.relay, "GET", f"/public/yui-media/{world.photo}", None)
    assert answer.status_code == 400 and answer.content != PNG


# --- the sweep's functions -----------------------------------------------------------------


def test_media_functions_are_for_the_service_role_only(world: World) -> None:
    relay = world.relay
    for token in (world.a.token, world.ha.jwt, relay.anon_key):
        assert rpc(relay, "yui_media_names", token, uid=world.a.id).status_code in DENIED
        assert rpc(relay, "yui_media_orphans", token).status_code in DENIED
    names = rpc(relay, "yui_media_names", relay.service_key, uid=world.a.id)
    assert names.status_code == 200 and world.photo in names.json()
    assert world.b_photo not in names.json()
    assert rpc(relay, "yui_media_orphans", relay.service_key).status_code == 200


def orphans(relay: LocalRelay, grace: str) -> list[str]:
    answer = rpc(relay, "yui_media_orphans", relay.service_key, grace=grace)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_unreferenced_upload_is_an_orphan_after_its_grace(world: World) -> None:
    relay = world.relay
    path = media_path(world.a, world.alpha)
    ok_upload(relay, world.a.token, path)
    assert path in orphans(relay, "0 seconds")
    assert path not in orphans(relay, "1 day")


def test_media_a_message_points_at_is_no_orphan(world: World) -> None:
    relay, a = world.relay, world.a
    in_body, in_meta = media_path(a, world.alpha), media_path(a, world.alpha)
    for path in (in_body, in_meta):
        ok_upload(relay, a.token, path)
    url = sign(relay, a.token, in_body).json()["signedURL"]
    assert a.say(world.alpha, f"```yui\nimage {relay.url}/storage/v1{url}\n```").status_code == 201
    assert a.say(world.alpha, "a photo", meta={"photo": in_meta}).status_code == 201
    left = orphans(relay, "0 seconds")
    assert in_body not in left and in_meta not in left


def test_media_of_a_deleted_agent_is_an_orphan_at_once_and_the_sweep_removes_it(
    relay: LocalRelay,
) -> None:
    person = relay.person("Leaver")
    agent, _ = person.add_agent("Gone")
    path = media_path(person, agent)
    ok_upload(relay, person.token, path)
    assert path not in orphans(relay, "1 day")
    gone = relay.fn("yui-agents", {"action": "delete", "id": agent["id"]}, person.token)
    assert gone.status_code == 200
    assert path in orphans(relay, "1 day")
    [(object_id,)] = relay.sql("select id::text from storage.objects where name = %s", (path,))
    swept = delete(relay, relay.service_key, path)
    assert swept.status_code == 200 and [o["name"] for o in swept.json()] == [path]
    assert not stored(relay, path) and object_id not in files_on_disk(relay)
