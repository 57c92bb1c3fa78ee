"""DingTalk file download: the robot's download code is exchanged for a short-lived URL."""

from __future__ import annotations


def download_request(transport, attachment) -> tuple[str, str, dict, bool]:
    data = transport.call(
        "POST",
        "/v1.0/robot/messageFiles/download",
        json={"downloadCode": attachment.key, "robotCode": transport.robot_code},
    )
    # The URL is signed for this file: it takes no access token.
    return "GET", data["downloadUrl"], {}, False
