"""E-mail: the person writes from their own addresses, strangers' mail is
outside data, and the agent reads, sends and saves attachments with tools.

See `channel.py` for the whole, `sensor.py` for listening, `authresults.py`
for what makes a mail the person's.
"""

from .channel import MailChannel, build_mail_channel
from .settings import MailSettings

__all__ = ["MailChannel", "MailSettings", "build_mail_channel"]
