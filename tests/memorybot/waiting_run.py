"""What a killed server leaves behind, built in `manage.py shell` through the real services:
a confided turn whose learning run waits in the database (its message was lost with the
process). Prints one JSON object: the run, its chat, the person's item, and whether this
shell started a learning worker (it must not [G2]).

    manage.py shell -c "from tests.memorybot.waiting_run import main; main()"
"""

import json
import threading

from chats import services as chat_services
from chats.models import Item
from conversations.turns import turn_run
from memorybot.models import LearningRun
from openbot import services
from openbot.access import Caller

MEMORY_MODEL = "openai:gpt-test"


def main() -> None:
    org = services.organization_create(name="Org")
    alice = services.person_create(organization=org, name="alice", admin=True)
    services.organization_settings_update(organization=org, bot_memory_model=MEMORY_MODEL)
    bot = services.bot_create(organization=org, name="helper")
    services.grant_set(bot=bot, level="write", person=alice)
    chat = chat_services.chat_create(
        caller=Caller(person=alice, organization=org), bot_id=bot.id, channel_id=None, test=False
    )
    turn = turn_run(chat=chat, person=alice, text="I swim every day.").turn
    run = LearningRun.objects.get(turn=turn)
    said = Item.objects.get(chat=chat, seq=turn.input_seq)
    recovery = [thread for thread in threading.enumerate() if thread.name == "openbot-recovery"]
    print(
        json.dumps(
            {
                "run": run.id,
                "status": run.status,
                "chat": chat.id,
                "item": said.public_id,
                "workerStarted": bool(recovery),
            }
        )
    )
