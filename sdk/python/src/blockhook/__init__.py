"""blockhook: ask a person and wait, answer the inbox, verify and type webhooks.

    from blockhook import Client
    client = Client()  # BLOCKHOOK_URL, BLOCKHOOK_API_KEY
    answer = client.ask("conv_…", "Deploy to production?")
"""

from ._async import AsyncClient
from ._errors import (
    ApiError,
    BlockhookError,
    Declined,
    Expired,
    NotApproved,
    WebhookVerificationError,
    Withdrawn,
)
from ._sync import Client
from ._types import (
    Answer,
    Attempt,
    Attachment,
    Conversation,
    CreatedConversation,
    Delivery,
    Endpoint,
    EventRecord,
    EventType,
    FieldError,
    FilterValue,
    Interaction,
    Option,
)
from .webhooks import (
    ButtonClicked,
    FormSubmitted,
    MessageReceived,
    UnknownEvent,
    User,
    Event,
    WebhookTest,
    parse_event,
    verify_webhook,
)

__all__ = [
    "Answer",
    "ApiError",
    "AsyncClient",
    "Attachment",
    "Attempt",
    "BlockhookError",
    "ButtonClicked",
    "Client",
    "Conversation",
    "CreatedConversation",
    "Declined",
    "Delivery",
    "Endpoint",
    "Event",
    "EventRecord",
    "EventType",
    "Expired",
    "FieldError",
    "FilterValue",
    "FormSubmitted",
    "Interaction",
    "MessageReceived",
    "NotApproved",
    "Option",
    "UnknownEvent",
    "User",
    "WebhookTest",
    "WebhookVerificationError",
    "Withdrawn",
    "parse_event",
    "verify_webhook",
]
__version__ = "0.1.0"
