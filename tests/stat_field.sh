# stat_field.sh - sourced by the mount and hntrain test helpers.

# stat_field MOUNTPOINT NAME: one number from .spritefs/stats.json
stat_field() {
	sed -n "s/.*\"$2\": \\([0-9.]*\\).*/\\1/p" "$1/.spritefs/stats.json"
}
