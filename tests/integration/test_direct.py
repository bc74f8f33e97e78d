"""Kept connections (``store/direct.py``) against a real redis-server: replies go to the caller
that asked, broken connections are replaced, a timed-out one never answers the next call; on RESP2
(read off the socket by ``store/wire.py``) and on RESP3 (read by redis-py) alike."""

from __future__ import annotations

import threading

import pytest
import redis

from celery_singleton_lock.store import wire
from celery_singleton_lock.store.direct import Direct, direct_for
from tests.support.servers import RedisServer


@pytest.fixture(scope="module")
def running():
    with RedisServer() as started:
        yield started


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def server(running, request):
    running.protocol = request.param
    admin = redis.Redis.from_url(running.url)
    admin.flushall()
    admin.script_flush()
    admin.close()
    yield running


def _client(server, **options) -> redis.Redis:
    options.setdefault("protocol", server.protocol)
    return redis.Redis.from_url(server.url, decode_responses=True, **options)


def _connections(admin: redis.Redis, name: str) -> int:
    return sum(1 for client in admin.client_list() if client.get("name") == name)


def test_connections_are_kept_and_a_reply_error_keeps_its_connection(server):
    client, admin = _client(server, client_name="kept"), _client(server)
    ask = Direct(client)
    assert ask("SET", "k", "v") == "OK"
    with pytest.raises(redis.exceptions.ResponseError):
        ask("INCR", "k")
    assert ask("GET", "k") == "v"
    assert _connections(admin, "kept") == 1
    ask.discard()


def test_a_killed_connection_is_replaced_and_the_call_answered(server):
    client, admin = _client(server), _client(server)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    assert ask("GET", "k") == "1"
    ask.discard()


def test_a_timed_out_call_leaves_no_reply_for_the_next_one(server):
    client = _client(server, socket_timeout=0.3)
    ask = Direct(client)
    ask("SET", "a", "first")
    server.pause()
    try:
        with pytest.raises(redis.exceptions.TimeoutError):
            ask("GET", "a")
    finally:
        server.resume()
    assert ask("SET", "b", "second") == "OK"  # not the late "first" of the timed-out GET
    assert ask("GET", "b") == "second"
    ask.discard()


def test_a_script_flushed_from_the_server_is_loaded_again(server):
    client, admin = _client(server), _client(server)
    script = client.register_script("return ARGV[1] .. KEYS[1]")
    ask = Direct(client)
    assert ask.script(script, ["k"], ["x"]) == "xk"
    admin.script_flush()
    assert ask.script(script, ["k"], ["y"]) == "yk"
    ask.discard()


def test_each_thread_reads_its_own_replies(server):
    client = _client(server)
    ask = Direct(client)
    wrong = []

    def work(n: int) -> None:
        for i in range(200):
            value = f"{n}-{i}"
            ask("SET", f"t:{n}", value)
            if ask("GET", f"t:{n}") != value:
                wrong.append(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert wrong == []
    ask.discard()


def test_a_cluster_client_is_asked_through_redis_py_itself():
    assert direct_for(object()) is None


#: Reply shapes of every kind a command can give: text, nil, integers, nested arrays, an error
#: inside an array, a Lua error, and a bulk string longer than one read of the socket.
SHAPES = [
    ("SET", "k", "v"),
    ("GET", "k"),
    ("GET", "missing"),
    ("SET", "k", "w", "NX", "PX", 1000, "GET"),
    ("INCRBY", "n", -7),
    ("RPUSH", "l", "a", "", "c"),
    ("LRANGE", "l", 0, -1),
    ("LRANGE", "nothing", 0, -1),
    ("EVAL", "return {1, {2, 'x', false}, 'y', {}}", 0),
    ("EVAL", "return redis.pcall('INCR', KEYS[1])", 1, "k"),
    ("EVAL", "return string.rep('z', 300000)", 0),
    ("EVAL", "return redis.error_reply('BUSYKEY not this one')", 0),
    ("EVAL", "return {1, redis.error_reply('ERR inside an array')}", 0),
    ("EVALSHA", "0" * 40, 0),
    ("INCR", "k"),
    ("PING",),
    ("SET", "bin", "é\x00\r\n".encode()),
    ("GET", "bin"),
]


@pytest.mark.parametrize("decode", [True, False], ids=["text", "bytes"])
def test_replies_read_off_the_socket_are_redis_pys_own(running, decode):
    """Every shape, asked through the short way, comes back as redis-py's parser reads it:
    the same values, types and exception classes. Each side runs the whole list on an empty
    database, so a command meets what the ones before it wrote (a value to read back, a string
    that ``INCR`` refuses)."""
    admin = redis.Redis.from_url(running.url)
    mine = redis.Redis.from_url(running.url, protocol=2, decode_responses=decode)
    theirs = redis.Redis.from_url(running.url, protocol=2, decode_responses=decode)
    ask, connection = Direct(mine), _connection(theirs)
    ask("PING")
    kept = ask._idle[0]
    admin.flushall()
    got = []
    for command in SHAPES:
        got.append(_outcome(lambda: ask(*command)))
        assert wire.speaks_for(kept), command
    admin.flushall()
    expected = []
    for command in SHAPES:
        connection.send_command(*command)
        expected.append(_outcome(connection.read_response))
    for command, mine_, theirs_ in zip(SHAPES, got, expected):
        assert mine_ == theirs_, command
    assert sum(isinstance(one, tuple) for one in expected) >= 4, "error replies were asked for"
    assert any(isinstance(one, (str, bytes)) and one not in ("OK", b"OK") for one in expected), "a value read back"
    theirs.connection_pool.release(connection)
    ask.discard()


def _connection(client: redis.Redis):
    try:
        return client.connection_pool.get_connection()
    except TypeError:  # redis-py 5 wants a command name it does not use
        return client.connection_pool.get_connection("_")


def _outcome(call):
    try:
        reply = call()
    except redis.exceptions.RedisError as exc:
        return type(exc), str(exc)
    if isinstance(reply, list):
        return [(type(item), str(item)) if isinstance(item, Exception) else item for item in reply]
    return reply


def test_only_a_plain_resp2_connection_takes_the_short_way(running):
    resp2 = _connection(redis.Redis.from_url(running.url, protocol=2))
    resp3 = _connection(redis.Redis.from_url(running.url, protocol=3))
    resp2.connect()
    resp3.connect()
    assert wire.speaks_for(resp2)
    assert not wire.speaks_for(resp3)
    resp2.next_health_check = 0  # idle past its health check: redis-py checks it first
    resp2.health_check_interval = 30
    assert not wire.speaks_for(resp2)
    resp2.disconnect()
    assert not wire.speaks_for(resp2)  # not connected: redis-py connects it
    resp3.disconnect()


def test_the_store_takes_the_short_way_unless_told_otherwise(running):
    """What the benchmark reports: the lock store's own clients speak RESP2 (the short way) unless
    the URL or the transport options ask for RESP3."""
    from celery_singleton_lock.store.connect import connect

    for options, short in ((None, True), ({"protocol": 3}, False)):
        client = connect(running.url, options)
        ask = direct_for(client)
        assert ask.short_way() is short, options
        ask.discard()
        client.close()
    client = connect(running.url + "?protocol=3")
    ask = direct_for(client)
    assert ask.short_way() is False
    ask.discard()
    client.close()


# -- a posted command: written now, its reply read later ------------------------------------------

@pytest.fixture
def resp2(server):
    """The server, for a client that can post: posting goes straight to the socket, RESP2 only."""
    if server.protocol == 3:
        pytest.skip("posting goes straight to the socket: RESP2 only")
    return server


def test_a_posted_command_is_applied_at_once_and_answered_by_the_next_call(server):
    client, admin = _client(server), _client(server)
    ask = Direct(client)
    assert ask("SET", "k", "v") == "OK"
    answers = []
    posted = ask.post(answers.append, "DEL", "k")
    if server.protocol == 3:  # redis-py reads RESP3: nothing is posted, the caller asks as usual
        assert not posted and answers == [] and admin.exists("k")
        return
    assert posted and ask.owes
    # Redis applied it as it came: gone before anyone read the reply
    assert _eventually(lambda: not admin.exists("k"))
    assert answers == []
    # the next call reads the reply first, then its own
    assert ask("SET", "k", "w") == "OK"
    assert answers == [1] and not ask.owes
    assert ask("GET", "k") == "w"
    ask.discard()


def test_settle_reads_a_posted_reply_and_an_error_reply_keeps_the_connection(resp2):
    client, admin = _client(resp2, client_name="posting"), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "v") == "OK"
    answers = []
    assert ask.post(answers.append, "INCR", "k")
    ask.settle()
    assert len(answers) == 1 and isinstance(answers[0], redis.exceptions.ResponseError)
    assert ask("GET", "k") == "v"
    assert _connections(admin, "posting") == 1
    ask.discard()


def test_settle_waits_for_a_posted_reply_that_is_not_in_yet(resp2):
    client, admin = _client(resp2), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    admin.execute_command("CLIENT", "PAUSE", 300, "ALL")  # the reply comes in 0.3 s
    assert ask.post(answers.append, "INCR", "k")
    ask.settle()
    assert answers == [2] and not ask.owes
    assert ask("GET", "k") == "2"
    ask.discard()


def test_a_command_larger_than_the_socket_buffer_is_written_whole(server):
    ask = Direct(_client(server))
    value = "x" * (8 << 20)
    assert ask("SET", "big", value) == "OK"
    assert ask("STRLEN", "big") == len(value)
    ask.discard()


def test_a_connection_lost_before_the_reply_tells_the_poster_and_the_next_call_is_answered(resp2):
    client, admin = _client(resp2), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    admin.execute_command("CLIENT", "PAUSE", 2000, "ALL")  # the reply is held back...
    try:
        assert ask.post(answers.append, "GET", "k")
        assert admin.client_kill_filter(_type="normal", skipme=True) >= 1  # ...and never comes
    finally:
        admin.execute_command("CLIENT", "UNPAUSE")
    assert ask("GET", "k") == "1"
    assert len(answers) == 1 and isinstance(answers[0], redis.exceptions.ConnectionError)
    ask.discard()


def test_a_handler_that_raises_does_not_fail_the_call_that_read_its_reply(resp2, caplog):
    ask = Direct(_client(resp2))
    assert ask("SET", "k", "1") == "OK"

    def broken(reply):
        raise RuntimeError("handler failed")

    assert ask.post(broken, "GET", "k")
    assert ask("GET", "k") == "1"
    assert "handling the answer to a command sent earlier failed" in caplog.text
    ask.discard()


@pytest.mark.parametrize("hold_back", [False, True], ids=["written", "held back"])
def test_a_fork_child_never_reads_or_writes_its_parents_posted_command(resp2, hold_back):
    import os

    client, admin = _client(resp2), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    assert ask.post(answers.append, "INCR", "k", hold_back=hold_back)
    applied = "1" if hold_back else "2"  # what the parent's post left before anyone reads or flushes
    if not hold_back:
        assert _eventually(lambda: admin.get("k") == "2")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 0
        try:
            # as the heartbeat's tick, a loop timer or a shutdown would, before any call of the child's own
            owed = ask.owes
            ask.flush()
            ask.settle()
            code = 0 if not owed and not ask.holds_back and answers == [] and ask("GET", "k") == applied \
                and answers == [] else 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert admin.get("k") == applied
    ask.settle()
    assert answers == [2] and admin.get("k") == "2"
    ask.discard()


def _eventually(check, timeout: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_a_call_after_a_post_waits_once_for_both_replies_in_order(resp2):
    client, admin = _client(resp2, client_name="both"), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    for n in range(50):  # the posted reply is rarely in before the next call is written
        assert ask.post(answers.append, "INCR", "k")
        assert ask("GET", "k") == str(n + 2)
    assert answers == list(range(2, 52))
    # an error reply to the posted command is its own; the call after it is answered
    assert ask.post(answers.append, "HGET", "k", "f")
    assert ask("GET", "k") == "51"
    assert isinstance(answers[-1], redis.exceptions.ResponseError)
    # and an error reply to the call is raised, the posted one answered first
    assert ask.post(answers.append, "GET", "k")
    with pytest.raises(redis.exceptions.ResponseError):
        ask("HGET", "k", "f")
    assert answers[-1] == "51" and not ask.owes
    assert _connections(admin, "both") == 1
    ask.discard()


# -- a held-back post: written with the next call, or by flush -------------------------------------

def test_a_held_back_post_rides_with_the_next_call_in_one_write(resp2):
    client, admin = _client(resp2, client_name="riding"), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    assert ask.post(answers.append, "INCR", "k", hold_back=True)
    assert ask.owes and ask.holds_back
    assert admin.get("k") == "1"  # nothing sent yet
    assert ask("GET", "k") == "2"  # sent in front of the call: applied first, both replies read
    assert answers == [2] and not ask.owes and not ask.holds_back
    assert _connections(admin, "riding") == 1
    ask.discard()


def test_flush_writes_a_held_back_post_and_its_reply_stays_owed(resp2):
    client, admin = _client(resp2), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    assert ask.post(answers.append, "INCR", "k", hold_back=True)
    ask.flush()
    assert _eventually(lambda: admin.get("k") == "2")
    assert ask.owes and not ask.holds_back and answers == []
    ask.flush()  # nothing left to write: the command is not sent twice
    assert ask("GET", "k") == "2" and answers == [2]
    ask.discard()


def test_settle_writes_a_held_back_post_then_reads_its_reply(resp2):
    ask = Direct(_client(resp2))
    assert ask("SET", "k", "1") == "OK"
    answers = []
    assert ask.post(answers.append, "INCR", "k", hold_back=True)
    ask.settle()
    assert answers == [2] and not ask.owes
    ask.discard()


def test_a_held_back_post_whose_connection_broke_tells_its_poster(resp2):
    client, admin = _client(resp2, client_name="broken"), _client(resp2)
    ask = Direct(client)
    assert ask("SET", "k", "1") == "OK"
    answers = []
    assert ask.post(answers.append, "INCR", "k", hold_back=True)
    assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    ask.flush()  # the write may fail, or succeed into a socket the server closed
    ask.settle()  # the reply never comes
    assert len(answers) == 1 and isinstance(answers[0], redis.exceptions.ConnectionError)
    assert ask("GET", "k") == "1"  # never applied; the next call is answered on a fresh connection
    ask.discard()
