class InsufficientStock(Exception):
    pass


class UnknownReservation(KeyError):
    pass
