"""The broker edge: the consumer that turns deliveries into handler calls and settles them
(publish, dead-letter, ack), with fair dispatch across tenants. Built by ``bootstrap``,
run by the entry points."""
