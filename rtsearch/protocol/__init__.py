"""Wire protocol v1 (docs/protocol.md): the spectrum and control messages (`wire`), the batched topics (`batch`),
the peaks' rules (`peaks`) and every topic name, ZeroMQ and MQTT (`topics`)."""
