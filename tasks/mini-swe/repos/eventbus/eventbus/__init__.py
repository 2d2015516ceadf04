from eventbus.bus import EventBus
from eventbus.once import once

__all__ = ["EventBus", "once"]
