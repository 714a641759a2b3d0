"""The event stream: typed events, their fold into `RunState`, what each changed, the bus, and `RunSource`."""
