-- Stand-in for slurmctld's job_submit/lua API (Slurm 22.05), then cases.
local script, grants_dir = arg[1], os.tmpname()
os.remove(grants_dir)
os.execute("mkdir -p " .. grants_dir)

local messages = {}
slurm = {
	SUCCESS = 0,
	ERROR = -1,
	log_user = function(fmt, ...) table.insert(messages, string.format(fmt, ...)) end,
	log_info = function() end,
	reservations = {
		pilot_4242 = { users = "alice,carol", duration = 43200 },
		pilot_77 = { users = "bob" },
		maint = { users = "alice" },
	},
}
assert(dofile(script) == slurm.SUCCESS, "the script must return slurm.SUCCESS")
GRANTS_DIR = grants_dir

-- Grant records as `pilot grant` writes them (pretty JSON).
local function grant(job, user, nodes, minutes)
	local f = assert(io.open(grants_dir .. "/" .. job .. ".json", "w"))
	f:write(string.format('{\n  "duration_minutes": %d,\n  "identity": null,\n  "job_id": %d,\n' ..
		'  "nodes": %d,\n  "reservation": "pilot_%d",\n  "user": "%s"\n}\n', minutes, job, nodes, job, user))
	f:close()
end
grant(4242, "alice", 2, 30 * 1440)
grant(77, "bob", 1, 10 * 1440)
-- The job's spank_job_env as slurmctld hands it over (indexed from 0).
local function run(job) return { [0] = "SLURM_PILOT_CONFIG_X=1", [1] = "SLURM_PILOT_RUN=" .. job } end

local DAY = 1440
local failures = 0
local function case(name, job, want_rc, want_text)
	messages = {}
	job.user_name = job.user_name or "alice"
	local parts = job.parts or { { name = "gpu", default_time = 4294967294, max_time = 60 * DAY } }
	local rc = slurm_job_submit(job, parts, 1001)
	local ok = rc == want_rc
	if ok and want_text then ok = messages[1] ~= nil and string.find(messages[1], want_text, 1, true) ~= nil end
	if not ok then
		failures = failures + 1
		print("FAIL " .. name .. ": rc " .. tostring(rc) .. " " .. tostring(messages[1]))
	else
		print("ok " .. name)
	end
end

case("short job", { time_limit = 2 * DAY }, slurm.SUCCESS)
case("exactly the limit", { time_limit = 7 * DAY }, slurm.SUCCESS)
case("long job without reservation", { time_limit = 20 * DAY }, slurm.ERROR, "pilot verdict")
case("message names the man page", { time_limit = 20 * DAY }, slurm.ERROR, "pilot(1)")
case("long job in its pilot reservation", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("no --pilot-run", { time_limit = 20 * DAY, reservation = "pilot_4242" }, slurm.ERROR, "--pilot-run=4242")
case("--pilot-run names another pilot", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(77) },
	slurm.ERROR, "it names 77")
case("nodes within the grant", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242),
	min_nodes = 2 }, slurm.SUCCESS)
case("more nodes than granted", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242),
	min_nodes = 3 }, slurm.ERROR, "asks for 3 nodes")
case("longer than granted", { time_limit = 31 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.ERROR, "exceeds the grant")
case("second listed user of the reservation, not of the grant",
	{ time_limit = 20 * DAY, reservation = "pilot_4242", user_name = "carol", spank_job_env = run(4242) },
	slurm.ERROR, "not granted to carol")
case("someone else's reservation", { time_limit = 20 * DAY, reservation = "pilot_77", spank_job_env = run(77) },
	slurm.ERROR, "not granted to alice")
case("not a pilot reservation", { time_limit = 20 * DAY, reservation = "maint" }, slurm.ERROR,
	"not a pilot_* reservation")
case("unknown pilot reservation", { time_limit = 20 * DAY, reservation = "pilot_9" }, slurm.ERROR,
	"does not exist")
case("several reservations", { time_limit = 20 * DAY, reservation = "maint,pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("no --time: partition maximum 60 days", { time_limit = 4294967294 }, slurm.ERROR, "60.0 days")
case("no --time: partition default 1 day",
	{ time_limit = 4294967294, parts = { { name = "gpu", default_time = DAY, max_time = 60 * DAY } } },
	slurm.SUCCESS)
case("unlimited", { time_limit = 4294967295 }, slurm.ERROR, "unlimited")
case("unlimited in a reservation", { time_limit = 4294967295, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.ERROR, "exceeds the grant")

-- Without the reservation table: the grant records of `pilot grant`.
slurm.reservations = nil
case("grant record", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) }, slurm.SUCCESS)
case("grant record of another user",
	{ time_limit = 20 * DAY, reservation = "pilot_4242", user_name = "bob", spank_job_env = run(4242) },
	slurm.ERROR, "not granted to bob")
case("no grant record", { time_limit = 20 * DAY, reservation = "pilot_5", spank_job_env = run(5) }, slurm.ERROR,
	"does not exist")

-- A table copy older than the reservation (created in the second of the
-- last refresh): the grant record answers.
slurm.reservations = { pilot_77 = { users = "bob" }, pilot_8 = { users = "alice" } }
case("reservation newer than the table", { time_limit = 20 * DAY, reservation = "pilot_4242", spank_job_env = run(4242) },
	slurm.SUCCESS)
case("newer reservation, another user",
	{ time_limit = 20 * DAY, reservation = "pilot_4242", user_name = "bob", spank_job_env = run(4242) },
	slurm.ERROR, "not granted to bob")
case("in neither", { time_limit = 20 * DAY, reservation = "pilot_5" }, slurm.ERROR, "does not exist")
case("in the table", { time_limit = 9 * DAY, reservation = "pilot_77", user_name = "bob", spank_job_env = run(77) },
	slurm.SUCCESS)
case("a reservation without a grant record", { time_limit = 9 * DAY, reservation = "pilot_8", spank_job_env = run(8) },
	slurm.ERROR, "no readable grant record")

-- Modifications: extending past the limit needs the grant; root may.
messages = {}
local rc = slurm_job_modify({ time_limit = 20 * DAY }, { resv_name = "", user_name = "alice" }, {}, 1001)
if rc ~= slurm.ERROR then failures = failures + 1; print("FAIL modify extension") else print("ok modify extension") end
rc = slurm_job_modify({ time_limit = 20 * DAY },
	{ resv_name = "pilot_4242", user_name = "alice", spank_job_env = run(4242), min_nodes = 1 }, {}, 1001)
if rc ~= slurm.SUCCESS then failures = failures + 1; print("FAIL modify within the grant") else print("ok modify within the grant") end
rc = slurm_job_modify({ time_limit = 40 * DAY },
	{ resv_name = "pilot_4242", user_name = "alice", spank_job_env = run(4242), min_nodes = 1 }, {}, 1001)
if rc ~= slurm.ERROR then failures = failures + 1; print("FAIL modify past the grant") else print("ok modify past the grant") end
rc = slurm_job_modify({ time_limit = 20 * DAY }, {}, {}, 0)
if rc ~= slurm.SUCCESS then failures = failures + 1; print("FAIL modify by root") else print("ok modify by root") end

os.remove(grants_dir .. "/4242.json")
os.remove(grants_dir .. "/77.json")
os.remove(grants_dir)
if failures > 0 then
	print(failures .. " failed")
	os.exit(1)
end
