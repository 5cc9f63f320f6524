"""Storage through the official clients, unchanged: supabase-py's `storage.from_('yui-media')`
and supabase-js's `storage.from('yui-media')` upload (as forms: the file part, its type, its
`cacheControl`), sign (one path, a batch, `download`), download, read info, ask `exists`, list,
remove, copy, move and use signed upload URLs; and every rule the bucket had still refuses,
now in Storage's status and error shape (supabase-py reads `error`, supabase-js `code`).

A has Alpha (served by HA) and Loose (served by nobody); B has Bravo (served by HB).
"""

from __future__ import annotations

import http.client
import json
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from storage3.exceptions import StorageApiError

from relay.gateway.storage_form import FORM_EXTRA
from tests.helpers.media import JPEG, PNG, objects
from tests.helpers.relay import Host, LocalRelay, Person, TwoPeople, two_people
from tests.helpers.sdk import python_client, run_js

LIMIT = 50 * 1024 * 1024
MB = 1 << 20
STORAGE = "/storage/v1"


def thread(person: Person | str, agent: dict[str, Any], side: str = "user") -> str:
    owner = person if isinstance(person, str) else person.id
    return f"{owner}/{agent['id']}/{side}"


def fresh(person: Person | str, agent: dict[str, Any], side: str = "user") -> str:
    return f"{thread(person, agent, side)}/{uuid.uuid4()}.png"


def stored(relay: LocalRelay, path: str) -> bool:
    return bool(objects(relay, path))


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> TwoPeople:
    return two_people(relay)


def refused(call: Callable[..., Any], *args: Any) -> tuple[int, str, str]:
    """What supabase-py raises for a refusal of `call(*args)`: (status, error, message)."""
    with pytest.raises(StorageApiError) as raised:
        call(*args)
    return int(raised.value.status), str(raised.value.code), str(raised.value.message)


@contextmanager
def py_bucket(relay: LocalRelay, token: str) -> Iterator[Any]:
    """supabase-py's `storage.from_('yui-media')`, every call with `token`."""
    with python_client(relay.url, relay.anon_key, token) as client:
        yield client.storage.from_("yui-media")


AS_PNG = {"content-type": "image/png"}


# --- supabase-py ----------------------------------------------------------------------------


def test_py_uploads_a_form_and_reads_it_back(world: TwoPeople) -> None:
    relay, a = world.relay, world.a
    path, auth = fresh(a, world.alpha), {"authorization": f"Bearer {a.token}"}
    with py_bucket(relay, a.token) as media:
        done = media.upload(path, PNG, {"content-type": "image/png", "cache-control": "120"})
        assert done.full_path == f"yui-media/{path}"
        assert media.download(path) == PNG
        info = media.info(path)
        assert (info["name"], info["size"], info["content_type"]) == (path, len(PNG), "image/png")
        assert info["cache_control"] == "max-age=120"
        assert media.exists(path) is True
        assert media.exists(fresh(a, world.alpha)) is False
        for route in (f"/object/info/yui-media/{path}", f"/object/yui-media/{path}"):  # HEAD
            asked = requests.head(relay.url + STORAGE + route, headers=auth, timeout=20)
            assert (asked.status_code, asked.content) == (200, b"")
        listed = media.list(thread(a, world.alpha), {"sortBy": {"column": "name", "order": "desc"}})
        assert path.rsplit("/", 1)[1] in [entry["name"] for entry in listed]
        assert [row["name"] for row in media.remove([path])] == [path]
        assert media.exists(path) is False
    assert objects(relay, path) == []


def test_py_signs_one_path_a_batch_and_a_download(world: TwoPeople) -> None:
    relay, a = world.relay, world.a
    path, missing = fresh(a, world.alpha), fresh(a, world.alpha)
    with py_bucket(relay, a.token) as media:
        media.upload(path, PNG, {"content-type": "image/png", "cache-control": "120"})
        single = media.create_signed_url(path, 60)  # expiresIn goes out as the string "60"
        named = media.create_signed_url(path, 60, {"download": "dinner.png"})
        plain = media.create_signed_url(path, 60, {"download": True})
        batch = media.create_signed_urls([path, missing, world.b.id + "/x"], 60)
    fetched = requests.get(single["signedURL"], timeout=20)
    assert fetched.content == PNG and "content-disposition" not in fetched.headers
    assert fetched.headers["cache-control"] == "private, max-age=120"
    attachment = requests.get(named["signedURL"], timeout=20)
    assert attachment.headers["content-disposition"] == 'attachment; filename="dinner.png"'
    own_name = requests.get(plain["signedURL"], timeout=20).headers["content-disposition"]
    assert own_name == f'attachment; filename="{path.rsplit("/", 1)[1]}"'
    assert [item["path"] for item in batch] == [path, missing, world.b.id + "/x"]
    assert requests.get(batch[0]["signedURL"], timeout=20).content == PNG
    assert [item["signedURL"] for item in batch[1:]] == [None, None]
    assert all(item["error"] for item in batch[1:])


def test_py_signed_upload_url_uploads_its_path_once(world: TwoPeople) -> None:
    relay, a = world.relay, world.a
    path, other, taken = (fresh(a, world.alpha) for _ in range(3))
    with py_bucket(relay, a.token) as media:
        media.upload(taken, PNG, AS_PNG)
        signed = media.create_signed_upload_url(path)
        # Anyone holding the URL uploads, with no token of their own, once, to that path only.
        with py_bucket(relay, relay.anon_key) as anyone:
            wrong = refused(anyone.upload_to_signed_url, other, signed["token"], PNG, AS_PNG)
            assert wrong[:2] == (400, "InvalidSignature")
            anyone.upload_to_signed_url(path, signed["token"], PNG, AS_PNG)
            again = refused(anyone.upload_to_signed_url, path, signed["token"], PNG, AS_PNG)
            assert again[:2] == (400, "InvalidJWT")
        assert media.download(path) == PNG
        media.remove([path])
        after = refused(media.upload_to_signed_url, path, signed["token"], PNG, AS_PNG)
        assert after[:2] == (400, "InvalidJWT") and "already used" in after[2]
        # Neither token does the other's work, and an upload token is no bearer token.
        link = f"{relay.url}{STORAGE}/object/sign/yui-media/{path}?token={signed['token']}"
        assert requests.get(link, timeout=20).status_code == 400
        download = media.create_signed_url(taken, 60)["signedURL"].split("token=")[1]
        assert refused(media.upload_to_signed_url, taken, download, PNG, AS_PNG)[0] == 400
        assert relay.rest("GET", "yui_agents", signed["token"]).status_code == 401
        # The same path rules as an upload, when the URL is asked for.
        agent_side = refused(media.create_signed_upload_url, fresh(a, world.alpha, "agent"))
        assert agent_side[:2] == (403, "Unauthorized")
    assert not stored(relay, other)


def test_py_a_signed_upload_url_is_judged_again_when_used(relay: LocalRelay) -> None:
    person = relay.person("Revokes later")
    agent, code = person.add_agent("Agent")
    host = Host.pair(relay, code, "revoked-later")
    path = fresh(person, agent, "agent")
    with py_bucket(relay, host.jwt) as media:
        signed = media.create_signed_upload_url(path)
        gone = relay.fn(
            "yui-agents", {"action": "connector_revoke", "id": host.connector["id"]}, person.token
        )
        assert gone.status_code == 200
        late = refused(media.upload_to_signed_url, path, signed["token"], PNG, AS_PNG)
        assert late[:2] == (403, "Unauthorized")
    assert not stored(relay, path)


def test_py_uploads_the_rules_refuse(world: TwoPeople) -> None:
    relay, a, alpha = world.relay, world.a, world.alpha
    taken = fresh(a, alpha)
    with py_bucket(relay, a.token) as media:
        media.upload(taken, PNG, AS_PNG)
    forbidden = (403, "Unauthorized")
    cases = [  # who, where, how: what supabase-py raises
        (a.token, fresh(a, alpha, "agent"), AS_PNG, forbidden),  # a person under agent/
        (a.token, fresh(world.b, world.bravo), AS_PNG, forbidden),  # another person's thread
        (a.token, taken, AS_PNG, (409, "Duplicate")),  # an existing path
        (a.token, fresh(a, alpha), {**AS_PNG, "upsert": "true"}, forbidden),  # x-upsert
        (world.ha.jwt, fresh(a, world.loose, "agent"), AS_PNG, forbidden),  # an unserved thread
        (a.token, fresh(a, alpha), {"content-type": "text/html"}, (415, "invalid_mime_type")),
    ]
    with py_bucket(relay, a.token) as media:  # an update overwrites: refused too
        assert refused(media.update, taken, PNG, AS_PNG)[:2] == forbidden
    for token, path, options, expected in cases:
        with py_bucket(relay, token) as media:
            assert refused(media.upload, path, b"<b>", options)[:2] == expected, path
        assert objects(relay, path) == ([(taken, "image/png", len(PNG))] if path == taken else [])


def test_py_what_a_host_may_not_see_is_missing(world: TwoPeople) -> None:
    relay = world.relay
    unserved = fresh(world.a, world.loose)
    with py_bucket(relay, world.a.token) as media:
        media.upload(unserved, PNG, AS_PNG)
    with py_bucket(relay, world.ha.jwt) as media:
        assert media.exists(unserved) is False
        assert refused(media.info, unserved)[:2] == (404, "not_found")
        assert refused(media.download, unserved)[:2] == (404, "not_found")
        assert media.create_signed_urls([unserved], 60)[0]["signedURL"] is None
        assert refused(media.remove, [unserved])[:2] == (403, "Unauthorized")
    assert stored(relay, unserved)


def test_py_copy_and_move_keep_the_rules(world: TwoPeople) -> None:
    relay, a = world.relay, world.a
    path, copied, moved = (fresh(a, world.alpha) for _ in range(3))
    with py_bucket(relay, a.token) as media:
        media.upload(path, PNG, AS_PNG)
        assert media.copy(path, copied)["Key"] == f"yui-media/{copied}"
        assert refused(media.copy, path, copied)[:2] == (409, "Duplicate")
        elsewhere = fresh(world.b, world.bravo)
        assert refused(media.move, path, elsewhere)[:2] == (403, "Unauthorized")
        assert refused(media.move, path, fresh(a, world.alpha, "agent"))[0] == 403
        assert media.move(path, moved) == {"message": "Successfully moved"}
        assert media.download(moved) == PNG and media.download(copied) == PNG
        assert media.exists(path) is False
    with py_bucket(relay, world.ha.jwt) as media:  # a host reads but deletes nothing
        assert refused(media.move, moved, fresh(a, world.alpha, "agent"))[0] == 403
    assert stored(relay, moved) and not stored(relay, elsewhere)


def test_py_a_file_past_the_limit_is_413(world: TwoPeople) -> None:
    path = fresh(world.a, world.alpha)
    with py_bucket(world.relay, world.a.token) as media:
        too_big = refused(media.upload, path, b"\0" * (LIMIT + 1), AS_PNG)
    assert too_big[:2] == (413, "Payload too large")
    assert not stored(world.relay, path)
    assert not any((Path(world.relay.home) / "relay" / "media" / ".tmp").iterdir())


# --- supabase-js ----------------------------------------------------------------------------

JS = """
import { createClient } from '@supabase/supabase-js'
const client = (token) => createClient(process.env.URL, process.env.ANON, {
  global: { headers: { Authorization: `Bearer ${token}` } },
  auth: { persistSession: false, autoRefreshToken: false },
})
const T = JSON.parse(process.env.TOKENS), P = JSON.parse(process.env.PATHS)
const media = (who) => client(T[who]).storage.from('yui-media')
const bytes = Buffer.from(process.env.PNG, 'hex')
const png = () => new Blob([bytes], { type: 'image/png' })
const shape = ({ data, error }) => error
  ? { error: { status: error.status, statusCode: error.statusCode, code: error.code } }
  : { data }
const out = {}
"""


def world_js(world: TwoPeople, body: str, paths: dict[str, str], **more: str) -> dict[str, Any]:
    """`run_storage_js` as A, B and HA (`media('a')`, `media('b')`, `media('ha')`)."""
    tokens = {"a": world.a.token, "b": world.b.token, "ha": world.ha.jwt, **more}
    return run_storage_js(world.relay, body, paths, **tokens)


def run_storage_js(
    relay: LocalRelay, body: str, paths: dict[str, str], **tokens: str
) -> dict[str, Any]:
    """Run `body` after the JS preamble, with these paths (`P`) and tokens (`T`); its `out`."""
    env = {
        "URL": relay.url,
        "ANON": relay.anon_key,
        "PNG": PNG.hex(),
        "JPEG": JPEG.hex(),
        "TOKENS": json.dumps(tokens),
        "PATHS": json.dumps(paths),
    }
    answer: dict[str, Any] = run_js(JS + body + "\nconsole.log(JSON.stringify(out))", env=env)
    return answer


def test_js_uploads_a_blob_and_reads_it_back(world: TwoPeople) -> None:
    a, alpha = world.a, world.alpha
    paths = {"blob": fresh(a, alpha), "raw": fresh(a, alpha), "dir": thread(a, alpha)}
    paths["none"] = fresh(a, alpha)
    script = """
const m = media('a')
out.up = shape(await m.upload(P.blob, png(), { cacheControl: '60' }))
const raw = Buffer.from(process.env.JPEG, 'hex')
out.raw = shape(await m.upload(P.raw, raw, { contentType: 'image/jpeg', cacheControl: '90' }))
const got = await m.download(P.blob)
out.same = Buffer.from(await got.data.arrayBuffer()).equals(bytes)
out.info = shape(await m.info(P.blob))
out.rawInfo = shape(await m.info(P.raw))
out.exists = (await m.exists(P.blob)).data
out.missing = (await m.exists(P.none)).data
out.list = shape(await m.list(P.dir, { search: P.blob.split('/').pop().slice(0, 8) }))
out.removed = shape(await m.remove([P.blob]))
out.after = (await m.exists(P.blob)).data
"""
    out = world_js(world, script, paths)
    assert out["up"]["data"]["fullPath"] == f"yui-media/{paths['blob']}"
    assert out["same"] is True
    info = out["info"]["data"]
    assert (info["name"], info["size"]) == (paths["blob"], len(PNG))
    assert (info["contentType"], info["cacheControl"]) == ("image/png", "max-age=60")
    raw = out["rawInfo"]["data"]
    assert (raw["contentType"], raw["cacheControl"]) == ("image/jpeg", "max-age=90")
    assert (out["exists"], out["missing"], out["after"]) == (True, False, False)
    assert [e["name"] for e in out["list"]["data"]] == [paths["blob"].rsplit("/", 1)[1]]
    assert [row["name"] for row in out["removed"]["data"]] == [paths["blob"]]


def test_js_signs_one_path_a_batch_and_a_download(world: TwoPeople) -> None:
    a = world.a
    paths = {"photo": fresh(a, world.alpha), "missing": fresh(a, world.alpha)}
    script = """
const m = media('a')
await m.upload(P.photo, png())
out.one = shape(await m.createSignedUrl(P.photo, 60))
out.named = shape(await m.createSignedUrl(P.photo, 60, { download: 'dinner.png' }))
out.many = shape(await m.createSignedUrls([P.photo, P.missing], 60, { download: true }))
"""
    out = world_js(world, script, paths)
    assert requests.get(out["one"]["data"]["signedUrl"], timeout=20).content == PNG
    named = requests.get(out["named"]["data"]["signedUrl"], timeout=20)
    assert named.headers["content-disposition"] == 'attachment; filename="dinner.png"'
    first, second = out["many"]["data"]
    got = requests.get(first["signedUrl"], timeout=20)
    assert got.content == PNG and got.headers["content-disposition"].startswith("attachment")
    assert second["path"] == paths["missing"] and second["signedUrl"] is None and second["error"]


def test_js_signed_upload_url_uploads_its_path_once(world: TwoPeople) -> None:
    a = world.a
    paths = {"path": fresh(a, world.alpha), "other": fresh(a, world.alpha)}
    paths["agent"] = fresh(a, world.alpha, "agent")
    script = """
const m = media('a'), anyone = media('anon')
const signed = await m.createSignedUploadUrl(P.path)
out.wrong = shape(await anyone.uploadToSignedUrl(P.other, signed.data.token, png()))
out.first = shape(await anyone.uploadToSignedUrl(P.path, signed.data.token, png()))
await m.remove([P.path])
out.again = shape(await anyone.uploadToSignedUrl(P.path, signed.data.token, png()))
out.agent = shape(await m.createSignedUploadUrl(P.agent))
"""
    out = world_js(world, script, paths, anon=world.relay.anon_key)
    assert out["wrong"]["error"]["status"] == 400
    assert out["wrong"]["error"]["code"] == "InvalidSignature"
    assert out["first"]["data"]["fullPath"] == f"yui-media/{paths['path']}"
    assert out["again"]["error"] == {"status": 400, "statusCode": "400", "code": "InvalidJWT"}
    assert out["agent"]["error"] == {"status": 403, "statusCode": "403", "code": "AccessDenied"}
    assert not stored(world.relay, paths["other"]) and not stored(world.relay, paths["path"])


def test_both_clients_read_the_one_bucket_and_change_none(world: TwoPeople) -> None:
    with python_client(world.relay.url, world.relay.anon_key, world.a.token) as client:
        [bucket] = client.storage.list_buckets()
        assert (bucket.id, bucket.public, bucket.file_size_limit) == ("yui-media", False, LIMIT)
        assert "image/png" in (client.storage.get_bucket("yui-media").allowed_mime_types or [])
        assert refused(client.storage.get_bucket, "other")[:2] == (404, "Bucket not found")
        assert refused(client.storage.create_bucket, "mine")[:2] == (403, "Unauthorized")
        assert refused(client.storage.delete_bucket, "yui-media")[0] == 403
    script = """
const s = client(T.a).storage
out.list = shape(await s.listBuckets({ search: 'media' }))
out.one = shape(await s.getBucket('yui-media'))
out.other = shape(await s.getBucket('other'))
out.make = shape(await s.createBucket('mine'))
out.empty = shape(await s.emptyBucket('yui-media'))
"""
    out = world_js(world, script, {})
    assert [bucket["id"] for bucket in out["list"]["data"]] == ["yui-media"]
    assert (out["one"]["data"]["public"], out["one"]["data"]["file_size_limit"]) == (False, LIMIT)
    assert out["other"]["error"] == {"status": 404, "statusCode": "404", "code": "NoSuchBucket"}
    assert out["make"]["error"]["status"] == out["empty"]["error"]["status"] == 403


def test_js_every_rule_still_refuses(world: TwoPeople) -> None:
    a, b = world.a, world.b
    paths = {
        "taken": fresh(a, world.alpha),
        "agentSide": fresh(a, world.alpha, "agent"),
        "othersThread": fresh(b, world.bravo),
        "upsert": fresh(a, world.alpha),
        "unserved": fresh(a, world.loose),
        "hostOutside": fresh(a, world.loose, "agent"),
        "copy": fresh(b, world.bravo),
    }
    script = """
const m = media('a'), host = media('ha')
await m.upload(P.taken, png())
await m.upload(P.unserved, png())
out.agentSide = shape(await m.upload(P.agentSide, png()))
out.othersThread = shape(await m.upload(P.othersThread, png()))
out.taken = shape(await m.upload(P.taken, png()))
out.upsert = shape(await m.upload(P.upsert, png(), { upsert: true }))
out.update = shape(await m.update(P.taken, png()))
out.type = shape(await m.upload(P.upsert, new Blob(['<b>'], { type: 'text/html' })))
out.hostOutside = shape(await host.upload(P.hostOutside, png()))
out.hostInfo = shape(await host.info(P.unserved))
out.hostExists = (await host.exists(P.unserved)).data
out.hostRemove = shape(await host.remove([P.unserved]))
out.copy = shape(await m.copy(P.taken, P.copy))
out.huge = shape(await m.upload(P.upsert, new Blob([new Uint8Array(50 * 1024 * 1024 + 1)],
  { type: 'image/png' })))
"""
    out = world_js(world, script, paths)
    forbidden = {"status": 403, "statusCode": "403", "code": "AccessDenied"}
    for case in ("agentSide", "othersThread", "upsert", "update", "hostOutside", "copy"):
        assert out[case]["error"] == forbidden, case
    assert out["taken"]["error"] == {"status": 409, "statusCode": "409", "code": "KeyAlreadyExists"}
    assert out["type"]["error"]["status"] == 415
    assert out["hostInfo"]["error"] == {"status": 404, "statusCode": "404", "code": "NoSuchKey"}
    assert out["hostExists"] is False and out["hostRemove"]["error"] == forbidden
    assert out["huge"]["error"] == {"status": 413, "statusCode": "413", "code": "EntityTooLarge"}
    for case in ("agentSide", "othersThread", "upsert", "hostOutside", "copy"):
        assert not stored(world.relay, paths[case]), case
    assert stored(world.relay, paths["unserved"])


def test_a_suspended_person_and_a_revoked_host_are_refused_by_both_clients(
    relay: LocalRelay,
) -> None:
    person = relay.person("Refused twice")
    agent, code = person.add_agent("Agent")
    host = Host.pair(relay, code, "revoked-both")
    mine, its = fresh(person, agent), fresh(person, agent, "agent")
    revoke = {"action": "connector_revoke", "id": host.connector["id"]}
    assert relay.fn("yui-agents", revoke, person.token).status_code == 200
    relay.sql("select yui_suspend('user', %s, true, 'abuse')", (person.id,))
    try:
        with py_bucket(relay, person.token) as media:
            assert refused(media.upload, mine, PNG, AS_PNG)[:2] == (403, "Unauthorized")
        with py_bucket(relay, host.jwt) as media:
            assert refused(media.upload, its, PNG, AS_PNG)[:2] == (403, "Unauthorized")
        script = """
out.mine = shape(await media('a').upload(P.mine, png()))
out.its = shape(await media('ha').upload(P.its, png()))
"""
        paths = {"mine": mine, "its": its}
        out = run_storage_js(relay, script, paths, a=person.token, ha=host.jwt)
    finally:
        relay.sql("select yui_suspend('user', %s, false)", (person.id,))
    assert out["mine"]["error"]["code"] == out["its"]["error"]["code"] == "AccessDenied"
    assert not stored(relay, mine) and not stored(relay, its)


# --- the form as it arrives, and what isn't served -----------------------------------

BOUNDARY = "yui-test-boundary"
FORM_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


def part(name: str, value: bytes, filename: str | None = None, mime: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    head = f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n"
    head += f"Content-Type: {mime}\r\n" if mime else ""
    return head.encode() + b"\r\n" + value + b"\r\n"


def post_form(
    relay: LocalRelay, token: str, path: str, body: Any, form_type: str = FORM_TYPE
) -> requests.Response:
    headers = {"authorization": f"Bearer {token}", "content-type": form_type}
    url = f"{relay.url}{STORAGE}/object/yui-media/{path}"
    return requests.post(url, data=body, headers=headers, timeout=120)


END = f"--{BOUNDARY}--\r\n".encode()


@pytest.mark.parametrize(
    ("case", "status", "error"),
    [
        ("no file", 400, "InvalidRequest"),
        ("cut short", 400, "InvalidRequest"),
        ("no boundary", 400, "InvalidRequest"),
        ("too much besides the file", 413, "Payload too large"),
    ],
)
def test_a_form_that_isnt_an_upload_is_refused_and_stores_nothing(
    world: TwoPeople, case: str, status: int, error: str
) -> None:
    relay, path = world.relay, fresh(world.a, world.alpha)
    photo = part("file", PNG, "a.png", "image/png")
    body = {
        "no file": part("cacheControl", b"3600") + END,
        "cut short": part("cacheControl", b"3600") + photo[:-10],
        "no boundary": photo + END,
        "too much besides the file": photo + part("junk", b"x" * 4096, "b.png") * 20 + END,
    }[case]
    form_type = "multipart/form-data" if case == "no boundary" else FORM_TYPE
    answer = post_form(relay, world.a.token, path, body, form_type)
    assert answer.status_code == status, answer.text
    assert answer.json()["statusCode"] == str(status) and answer.json()["error"] == error
    assert not stored(relay, path)


def gateway_peak_growth(relay: LocalRelay, action: Callable[[], Any]) -> int:
    """How far above its resident memory the gateway went during `action`, in bytes."""
    pid = json.loads((Path(relay.home) / "relay" / "relay.json").read_text())["gateway_pid"]
    status = Path(f"/proc/{pid}/status")
    before = re.search(r"^VmRSS:\s+(\d+)", status.read_text(), re.M)
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak, reset: what `action` costs
    action()
    peak = re.search(r"^VmHWM:\s+(\d+)", status.read_text(), re.M)
    assert before and peak
    return (int(peak.group(1)) - int(before.group(1))) * 1024


def test_a_200_mb_chunked_form_is_a_413_and_costs_no_memory(world: TwoPeople) -> None:
    relay, path = world.relay, fresh(world.a, world.alpha)
    block = b"\0" * MB

    def body() -> Iterator[bytes]:  # no Content-Length: the gateway has to count
        yield part("cacheControl", b"3600") + part("file", b"", "a.png", "image/png")[:-2]
        for _ in range(200):
            yield block

    answers: list[requests.Response] = []
    grew = gateway_peak_growth(
        relay, lambda: answers.append(post_form(relay, world.a.token, path, body()))
    )
    assert answers[0].status_code == 413 and answers[0].json()["error"] == "Payload too large"
    assert grew < 50 * MB, f"the gateway grew by {grew // MB} MB"
    assert not stored(relay, path)
    assert not any((Path(relay.home) / "relay" / "media" / ".tmp").iterdir())


def test_a_declared_oversize_form_is_refused_before_it_is_sent(world: TwoPeople) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", world.relay.port, timeout=20)
    try:
        connection.putrequest("POST", f"{STORAGE}/object/yui-media/{fresh(world.a, world.alpha)}")
        connection.putheader("authorization", f"Bearer {world.a.token}")
        connection.putheader("content-type", FORM_TYPE)
        connection.putheader("content-length", str(LIMIT + FORM_EXTRA + 1))
        connection.endheaders()  # and not a byte of the body
        assert connection.getresponse().status == 413
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("method", "route"),
    [
        ("POST", "/object/list-v2/yui-media"),
        ("GET", "/render/image/authenticated/yui-media/x.png"),
        ("DELETE", "/cdn/yui-media/x.png"),
        ("PATCH", "/object/yui-media/x.png"),
        ("GET", "/s3/yui-media"),
        ("OPTIONS", "/object/yui-media/x.png"),
    ],
)
def test_what_isnt_served_answers_in_storages_shape(
    world: TwoPeople, method: str, route: str
) -> None:
    auth = {"authorization": f"Bearer {world.a.token}"}
    answer = requests.request(
        method, f"{world.relay.url}{STORAGE}{route}", headers=auth, timeout=20
    )
    assert answer.status_code == 404
    assert answer.json() == {
        "statusCode": "404",
        "error": "Not Found",
        "message": f"Route {method}:{STORAGE}{route} not found",
    }
