"""The fair queue's Lua scripts (``redis_fair_queue.py`` says what the keys hold).

Each script touches one slot, but for the ``_POP_AND_TAKE`` and ``_RECOVER`` of one Redis
server, which name a conversation's keys inside the script (from ``tenant|user|conversation``
and the parts of the key layout passed as arguments) so that a look and what follows from
it are one atomic step.
"""

from __future__ import annotations

UID_LENGTH = 32
ADMITTER_LENGTH = 12
"""A delivery's uid starts with the id of the replica that admitted it (and holds it unacked
in RabbitMQ): whoever completes it knows whom to tell."""

_ADMIT = """
if ARGV[6] == '2' then
  redis.call('SREM', KEYS[4], ARGV[7])
elseif ARGV[6] == '1' or redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('SADD', KEYS[4], ARGV[7])
  redis.call('EXPIRE', KEYS[4], ARGV[8])
  return 3
end
redis.call('HSETNX', KEYS[3], ARGV[5], 0)
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
if n > 1 then return 0 end
if ARGV[2] == '1' and redis.call('SET', KEYS[2], ARGV[3], 'NX', 'PX', ARGV[4]) then
  redis.call('HINCRBY', KEYS[3], ARGV[5], 1)
  return 2
end
return 1
"""
"""Admit one delivery (KEYS: park, lease, claims, overflow ids; ARGV: entry, take?, token,
ttl ms, uid, how, event id, overflow ttl s). ``how``: 0 admit unless the conversation has
deliveries in an overflow queue (then moved behind them: 3); 1 move it to the overflow
(its tenant is at its bound: 3); 2 admit it (it comes from the overflow, or is admitted
again after Redis lost it) and strike its id off. Admitted: 0 behind others, 1 first
(ready), 2 first and taken with the token."""
_POP_HEAD = """
local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, 1)
local left = redis.call('ZCARD', KEYS[1])
if #m == 0 then
  if left == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
  return false
end
redis.call('ZREM', KEYS[1], m[1])
"""
"""The ready set's oldest conversation due by ARGV[2], removed (false when none is; the
tenant leaves the set of tenants with work once its ready set is empty): the start of
``_POP`` and ``_POP_AND_TAKE``."""
_TAKE = """
local head = redis.call('LINDEX', KEYS[1], 0)
if not head then return {0} end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1} end
local taken = redis.call('HINCRBY', KEYS[3], string.sub(head, 1, UID_LENGTH), 1)
return {2, head, taken, redis.call('LLEN', KEYS[1]) - 1}
""".replace("UID_LENGTH", str(UID_LENGTH))
_POP_AND_TAKE = (
    _POP_HEAD
    + """if left == 1 then redis.call('SREM', KEYS[2], ARGV[1]) end
local bar = string.find(m[1], '|', 1, true)
local bar2 = string.find(m[1], '|', bar + 1, true)
local scope = ARGV[6] .. string.sub(m[1], 1, bar2 - 1) .. ARGV[7]
local conversation = string.sub(m[1], bar2 + 1)
local park = scope .. ARGV[8] .. conversation
local head = redis.call('LINDEX', park, 0)
if not head then
  redis.call('ZREM', KEYS[3], m[1])
  return {0, m[1]}
end
if not redis.call('SET', scope .. ARGV[9] .. conversation, ARGV[4], 'NX', 'PX', ARGV[5]) then
  redis.call('ZREM', KEYS[3], m[1])
  redis.call('ZADD', KEYS[1], 'NX', ARGV[11], m[1])
  redis.call('SADD', KEYS[2], ARGV[1])
  return {1, m[1]}
end
redis.call('ZADD', KEYS[3], ARGV[3], m[1])
local taken = redis.call('HINCRBY', scope .. ARGV[10] .. conversation,
  string.sub(head, 1, UID_LENGTH), 1)
return {2, m[1], head, taken, redis.call('LLEN', park) - 1}
""".replace("UID_LENGTH", str(UID_LENGTH))
)
"""``_POP`` and ``_TAKE`` in one script, on one Redis server only: the popped
conversation's keys are named inside the script (ARGV 6-10: the parts of their names
around ``tenant|user`` and the conversation id), which a Redis Cluster refuses (they live
in the user's slot, not the shard's). Returns false (none due), ``{0, member}`` (no
delivery left), ``{1, member}`` (the lease is held elsewhere: ready again after ARGV[11])
or ``{2, member, head, times taken, deliveries behind it}``."""
_COMPLETE = """
local popped = 0
local head = redis.call('LINDEX', KEYS[1], 0)
if head and string.sub(head, 1, string.len(ARGV[2])) == ARGV[2] then
  redis.call('LPOP', KEYS[1])
  popped = 1
end
redis.call('HDEL', KEYS[3], ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return {popped, redis.call('LLEN', KEYS[1])}
"""
_RELEASE = """
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return redis.call('LLEN', KEYS[1])
"""
_LOOK = """
return {redis.call('LLEN', KEYS[1]), redis.call('PTTL', KEYS[2])}
"""
_READY = """
redis.call('ZADD', KEYS[1], 'NX', ARGV[3], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[2]) end
"""
_POP = (
    _POP_HEAD
    + """redis.call('ZADD', KEYS[3], ARGV[3], m[1])
if left == 1 then redis.call('SREM', KEYS[2], ARGV[1]) end
return m[1]
"""
)


_NAMES = """
local bar = string.find(m, '|', 1, true)
local bar2 = string.find(m, '|', bar + 1, true)
local tenant = string.sub(m, 1, bar - 1)
local scope = ARGV[3] .. string.sub(m, 1, bar2 - 1) .. ARGV[4]
local conversation = string.sub(m, bar2 + 1)
"""
_RECOVER = (
    """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local recovered = 0
for _, m in ipairs(due) do
"""
    + _NAMES
    + """  local pttl = redis.call('PTTL', scope .. ARGV[6] .. conversation)
  if pttl > 0 then
    redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[1]) + pttl + 1, m)
  else
    if redis.call('LLEN', scope .. ARGV[5] .. conversation) > 0 then
      redis.call('ZADD', ARGV[7] .. tenant, 'NX', ARGV[1], m)
      redis.call('SADD', KEYS[2], tenant)
      recovered = recovered + 1
    end
    redis.call('ZREM', KEYS[1], m)
  end
end
return {#due, recovered}
"""
)
"""One server only: a batch of the shard's due watch entries (KEYS: its ``taken`` and
``tenants``; ARGV: now, batch size, the name parts of ``_POP_AND_TAKE`` (3-6: head, tail,
park, lease) and the shard's ready-set prefix), each looked at and acted on in the same
atomic step: a held conversation is looked at again when its lease would lapse, one with
deliveries and no holder is made ready, an empty one is dropped. Nothing admitted between
the look and the removal can be left without a watch entry (the two-round-trip look of a
cluster can). Returns ``{due, made ready}``."""
_RETAKE = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder then return 0 end
local head = redis.call('LINDEX', KEYS[3], 0)
if not head or string.sub(head, 1, string.len(ARGV[3])) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
"""Before a retry of a taken delivery (KEYS: lease, claims, park; ARGV: token, ttl, uid):
still held with the token (renewed), or free while the delivery is still its
conversation's head (taken again with the same token): 1. Held by another, or the delivery
is no longer the head (done, or lost with Redis's data): 0, and the taker lets it go."""
_AUDIT = """
local missing = {}
local any = redis.call('LLEN', KEYS[1]) > 0
for i = 1, #ARGV do
  if not any or redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    missing[#missing + 1] = ARGV[i]
  end
end
return {redis.call('PTTL', KEYS[3]), missing}
"""
"""An admitter's look at its unanswered deliveries of one conversation (KEYS: park,
claims, lease; ARGV: uids): the lease's PTTL and the uids Redis no longer has (a restart
without persistence, a failover to a replica that lagged, an eviction)."""
