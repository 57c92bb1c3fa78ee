"""`manage.py memory_reembed --model ID`: re-embed every memory under a model, then switch.

Resumable (only memories without a vector under the model are embedded, so an interrupted run
continues where it stopped) and safe for search: the switch to the new model is one
transaction, made only when every memory has a vector under it.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from cadre.memory import embeddings, reembed
from cadre.memory.models import EmbeddingModel


class Command(BaseCommand):
    help = "Re-embed all memories under an embedding model and make it the active one."

    def add_arguments(self, parser):
        parser.add_argument(
            "--model", required=True, help="Embedding model id, e.g. openai/text-embedding-3-small"
        )
        parser.add_argument("--provider", help="Register the model first: local or openai")
        parser.add_argument("--name", help="Provider's model name (with --provider)")
        parser.add_argument("--dimension", type=int, help="Vector size (with --provider)")
        parser.add_argument("--batch-size", type=int, default=256)
        parser.add_argument("--limit", type=int, help="Stop after this many (resume later)")
        parser.add_argument(
            "--no-activate", action="store_true", help="Embed but do not switch search to the model"
        )

    def handle(self, *args, **options):
        model_id = options["model"]
        if options["provider"]:
            if not options["name"] or not options["dimension"]:
                raise CommandError("--provider needs --name and --dimension")
            try:
                embeddings.register_model(
                    model_id, options["provider"], options["name"], options["dimension"]
                )
            except ValueError as error:
                raise CommandError(str(error)) from None
        elif not EmbeddingModel.objects.filter(pk=model_id).exists():
            raise CommandError(
                f"Unknown embedding model {model_id!r}: register it with "
                "--provider, --name and --dimension"
            )
        bar = tqdm(
            desc=f"embedding under {model_id}",
            unit="memory",
            file=self.stderr._out,
            disable=options["verbosity"] == 0,
        )

        def start(total: int) -> None:
            bar.reset(total=total)

        result = reembed.reembed(
            model_id,
            activate=not options["no_activate"],
            batch_size=options["batch_size"],
            on_start=start,
            on_progress=bar.update,
            limit=options["limit"],
        )
        bar.close()
        state = "active" if result["activated"] else result["status"]
        self.stdout.write(
            f"{result['embedded']} embedded, {result['remaining']} remaining; "
            f"model {model_id} is {state}"
        )
