"""Remote media comes from public addresses only.

An agent names a picture by URL and the bridge fetches it and publishes the bytes as a signed
link, so a URL that reaches the host's own network (loopback, a private range, a cloud's
metadata service) would hand its answer to whoever wrote the reply. Each hop, the first and
every redirect, is resolved, refused unless every address it has is public, and connected to
the address that was checked (a TLS certificate is still checked against the name), so a name
can't resolve one way for the check and another for the connection. Redirects are followed
here, a bounded number of them; anything else is the caller's (`bridges.media.files.fetch`).

`--allow-private-media` lifts the rule for the whole process, for local testing: the engine
prepares replies with no options of its own, so the rule is the process's (`POLICY`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

import urllib3
from requests.utils import DEFAULT_CA_BUNDLE_PATH, requote_uri
from urllib3.util import make_headers

from bridges.client.relay import USER_AGENT
from state.errors import MediaRefused

MAX_HOPS = 5  # requests in one fetch: the first and four redirects
REDIRECTS = frozenset((301, 302, 303, 307, 308))
CA_BUNDLE = DEFAULT_CA_BUNDLE_PATH  # the roots every other HTTPS call here trusts (requests')
ALLOWED_HINT = "for local testing: --allow-private-media"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata services: most are link-local, but not all of them.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254")
)
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: someone's private network
IETF = ipaddress.ip_network("192.0.0.0/24")  # protocol assignments, not a place to fetch from
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # an IPv4 address inside an IPv6 one


@dataclass
class Policy:
    """What this process may fetch from: public addresses only, unless told otherwise."""

    private: bool = False


POLICY = Policy()


def allow_private_media(allowed: bool = True) -> None:
    """Let this process's fetches reach private addresses too (`--allow-private-media`)."""
    POLICY.private = allowed


def where(url: str) -> str:
    """A URL without its query or fragment (which may carry a token), for messages."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def not_public(address: Address) -> str | None:
    """What kind of address this is when it isn't a public one (loopback, private, …); None
    for a public one. An IPv4 address inside an IPv6 one (mapped, 6to4, NAT64) is judged as
    the IPv4 address it reaches."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and address in NAT64:
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None:
            return not_public(inner)
    if address in METADATA:
        return "cloud metadata"
    for kind, found in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared", address in SHARED),
        ("reserved", address.is_reserved or address in IETF),
        ("site-local", isinstance(address, ipaddress.IPv6Address) and address.is_site_local),
        ("private", address.is_private or not address.is_global),
    ):
        if found:
            return kind
    return None


def _addresses(host: str, port: int, said: str) -> list[str]:
    """Every address `host` has, each one public (unless the policy allows private ones);
    `said` names the hop in a refusal."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise MediaRefused(f"can't fetch {said}: {host} has no address") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    for address in addresses if not POLICY.private else []:
        kind = not_public(ipaddress.ip_address(address.partition("%")[0]))
        if kind is not None:
            raise MediaRefused(
                f"{said} is on a {kind} address ({address}): only public addresses are fetched",
                hint=ALLOWED_HINT,
            )
    return addresses


def _pool(
    scheme: str, address: str, port: int, host: str, timeout: float
) -> urllib3.HTTPConnectionPool:
    """Connections to `address` itself, for `host`: TLS checks the certificate against the
    name (and sends it as SNI), not against the address."""
    wait = urllib3.Timeout(connect=timeout, read=timeout)
    if scheme == "https":
        return urllib3.HTTPSConnectionPool(
            address,
            port,
            timeout=wait,
            retries=False,
            server_hostname=host,
            assert_hostname=host,
            cert_reqs="CERT_REQUIRED",
            ca_certs=CA_BUNDLE,
        )
    return urllib3.HTTPConnectionPool(address, port, timeout=wait, retries=False)


def _hop(
    url: str, said: str, timeout: float, stack: contextlib.ExitStack
) -> urllib3.BaseHTTPResponse:
    """One GET of `url` (`said` names it in messages: the URL, or the redirect to it), on a
    connection to an address that was checked."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except (ValueError, UnicodeError):
        raise MediaRefused(f"can't fetch {said}: its host or port can't be read") from None
    if parts.scheme not in ("http", "https") or not host:
        raise MediaRefused(f"can't fetch {said}: only http and https URLs are fetched")
    named = f"[{host}]" if ":" in host else host
    headers = {"host": named if parts.port is None else f"{named}:{port}", "user-agent": USER_AGENT}
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers |= make_headers(basic_auth=credentials)
    target = requote_uri((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    failed: Exception | None = None
    for address in _addresses(host, port, said):
        pool = _pool(parts.scheme, address, port, host, timeout)
        stack.callback(pool.close)
        try:
            return pool.urlopen(
                "GET",
                target,
                headers=headers,
                redirect=False,
                retries=False,
                preload_content=False,
                assert_same_host=False,
            )
        except urllib3.exceptions.ConnectTimeoutError as exc:  # refused or silent: try the next
            failed = exc
    raise failed or MediaRefused(f"can't fetch {said}: {host} has no address")


@contextlib.contextmanager
def opened(url: str, *, timeout: float) -> Iterator[urllib3.BaseHTTPResponse]:
    """The answer to a GET of `url` after its redirects (any status but a redirect), every
    hop checked; `MediaRefused` for an address that isn't public, a redirect that isn't to
    http(s), or too many of them. Network failures raise urllib3's errors."""
    with contextlib.ExitStack() as stack:
        hop, said = url, where(url)
        for _ in range(MAX_HOPS):
            response = _hop(hop, said, timeout, stack)
            location = response.headers.get("location")
            if response.status not in REDIRECTS or not location:
                yield response
                return
            response.drain_conn()
            hop = urljoin(hop, location)
            said = f"{where(url)}'s redirect to {where(hop)}"
        raise MediaRefused(f"{where(url)} redirects more than {MAX_HOPS - 1} times")
