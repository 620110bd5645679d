from django.db import models

from openbot.models import Organization, Person


class SignInLink(models.Model):
    """A one-time link that signs a person in to `/me/` in one organization; only the hash of
    its secret is stored, and it is spent by its first use."""

    key_hash = models.CharField(max_length=64, unique=True)
    person = models.ForeignKey(Person, on_delete=models.CASCADE)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"sign-in link {self.pk}"
