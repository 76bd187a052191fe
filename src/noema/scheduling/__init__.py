"""Time and alarms: reading when and how often from words, keeping schedules,
and the tools the model sets them with. Firings reach the model as events of
the scheduler sensor (`perception.sensors.scheduler`)."""
