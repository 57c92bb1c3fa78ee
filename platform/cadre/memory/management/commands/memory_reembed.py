"""`manage.py memory_reembed --model ID [--organization SLUG ...]`: re-embed the memories of
each organization (every one by default) under a model, then switch each one's search to it.

The instance operator's tool: it acts organization by organization, as each one's own re-embed
would — the switch is that organization's, audited in it (actor: the platform), and an
organization that holds the switch for a person (its evaluation gate, or rated turns to
check recall on) is filled but not switched: its admins switch on the Models page. Resumable
(only memories without a vector under the model are embedded, so an interrupted run continues
where it stopped) and safe for search: each switch is one transaction, made only when every
memory of that organization has a vector under the model.

`--turns` recomputes instead, in place, the conversation-turn vectors each organization
already has under the model (after an upgrade changed how turns are embedded: see
docs/memory-retrieval.md); `--after-id` resumes it for one `--organization`.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from cadre.memory import activation, embeddings, reembed
from cadre.memory.models import EmbeddingModel
from cadre.tenancy.models import Organization


class Command(BaseCommand):
    help = (
        "Re-embed each organization's memories under an embedding model and make it that "
        "organization's active one (unless it holds the switch for a person)."
    )

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
        parser.add_argument(
            "--turns",
            action="store_true",
            help="Recompute in place the conversation-turn vectors already under the model",
        )
        parser.add_argument(
            "--after-id",
            type=int,
            default=0,
            help="With --turns and one --organization: resume after this memory id (the last "
            "one the interrupted run printed for that organization)",
        )
        parser.add_argument(
            "--organization",
            action="append",
            default=[],
            metavar="SLUG",
            help="Only this organization (repeat for several); default: every organization",
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
        if options["after_id"] and (not options["turns"] or len(options["organization"]) != 1):
            # Memory ids interleave across organizations: one organization's last id would
            # skip another's earlier turns.
            raise CommandError("--after-id resumes --turns for one --organization")
        organizations = Organization.objects.order_by("pk")
        if options["organization"]:
            organizations = organizations.filter(slug__in=options["organization"])
            unknown = set(options["organization"]) - {o.slug for o in organizations}
            if unknown:
                raise CommandError(f"Unknown organization(s): {', '.join(sorted(unknown))}")
        bar = tqdm(
            desc=f"embedding under {model_id}",
            unit="memory",
            file=self.stderr._out,
            disable=options["verbosity"] == 0,
        )

        def start(total: int) -> None:
            bar.reset(total=total)

        if options["turns"]:
            for organization in organizations:
                result = reembed.refresh_turn_vectors(
                    model_id,
                    organization,
                    batch_size=options["batch_size"],
                    after_id=options["after_id"],
                    on_progress=bar.update,
                )
                self.stdout.write(
                    f"{organization.slug}: {result['refreshed']} turn vectors recomputed, "
                    f"{result['skipped']} skipped (changed meanwhile, re-embedded by their "
                    f"task); last memory id {result['last_id']}"
                )
            bar.close()
            return
        limit = options["limit"]
        for organization in organizations:
            if limit is not None and limit <= 0:
                break
            held = activation.activation_held(organization)
            result = reembed.reembed(
                model_id,
                organization,
                activate=not options["no_activate"] and not held,
                batch_size=options["batch_size"],
                on_start=start,
                on_progress=bar.update,
                limit=limit,
            )
            if limit is not None:
                limit -= result["embedded"]
            state = "active" if result["activated"] else result["status"]
            if held and not result["activated"] and not options["no_activate"]:
                state += " (the organization switches it itself)"
            self.stdout.write(
                f"{organization.slug}: {result['embedded']} embedded, "
                f"{result['remaining']} remaining; model {model_id} is {state}"
            )
        bar.close()
