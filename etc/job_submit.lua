--[[
 slurm-pilot job_submit/lua: long jobs need a granted pilot reservation.

 A job whose time limit exceeds MAX_UNPILOTED_DAYS must run inside a
 reservation named pilot_* (created by `pilot grant` after a GO verdict)
 whose Users include the submitting user; otherwise the submission is
 rejected with a message that names `pilot verdict` and pilot(1).

 Install: copy to the directory of slurm.conf as job_submit.lua and set
 JobSubmitPlugins=lua (Slurm 22.05: slurm_job_submit(job_desc, part_list,
 submit_uid)). Keep MAX_UNPILOTED_DAYS equal to the policy's
 thresholds.max_unpiloted_days (pilot.conf(5)).
--]]

-- Site settings.
MAX_UNPILOTED_DAYS = 7
RESERVATION_PREFIX = "pilot_"
-- Grants recorded by `pilot grant` (<state_dir>/grants), consulted when
-- slurmctld does not expose the reservation table (an empty string: never).
GRANTS_DIR = "/var/lib/slurm-pilot/grants"

local NO_VAL = 4294967294
local INFINITE = 4294967295

-- The job's time limit in minutes, or nil when neither the job nor its
-- partitions set one.
local function time_limit_minutes(job_desc, part_list)
	local t = job_desc.time_limit
	if t ~= nil and t ~= NO_VAL then return t end
	-- No --time: the partition's default time, else its maximum.
	local want = job_desc.partition
	local limit = nil
	if part_list ~= nil then
		for _, part in pairs(part_list) do
			local name = part.name
			if want == nil or want == "" or (name ~= nil and string.find("," .. want .. ",", "," .. name .. ",", 1, true)) then
				local d = part.default_time
				if d == nil or d == NO_VAL then d = part.max_time end
				if d ~= nil and d ~= NO_VAL and (limit == nil or d > limit) then limit = d end
			end
		end
	end
	return limit
end

local function list_has(csv, item)
	if csv == nil or item == nil then return false end
	for entry in string.gmatch(csv, "[^,]+") do
		if entry == item then return true end
	end
	return false
end

-- The user names of reservation `name`: from slurmctld's table when the
-- plugin exposes it and the table has it, else from the grant record
-- `pilot grant` wrote. The plugin refreshes its copy of the table only when
-- slurmctld's reservation time stamp (whole seconds) is newer than the
-- copy's, so a reservation created in the same second as the last refresh
-- is missing from it until the next change.
local function reservation_users(name)
	if slurm.reservations ~= nil then
		local r = slurm.reservations[name]
		if r ~= nil then return r.users end
	end
	if GRANTS_DIR == "" then return nil end
	local job = string.match(name, "^" .. RESERVATION_PREFIX .. "(%d+)$")
	if job == nil then return nil end
	local f = io.open(GRANTS_DIR .. "/" .. job .. ".json", "r")
	if f == nil then return nil end
	local text = f:read(65536) or ""
	f:close()
	return string.match(text, '"user"%s*:%s*"([^"]*)"')
end

function pilot_check(job_desc, part_list, submit_uid)
	local limit = time_limit_minutes(job_desc, part_list)
	local max_minutes = MAX_UNPILOTED_DAYS * 24 * 60
	if limit == nil or (limit ~= INFINITE and limit <= max_minutes) then
		return slurm.SUCCESS, nil
	end
	local user = job_desc.user_name
	local resv = job_desc.reservation
	local why
	if resv == nil or resv == "" then
		why = "it names no reservation"
	else
		for name in string.gmatch(resv, "[^,]+") do
			if string.sub(name, 1, #RESERVATION_PREFIX) == RESERVATION_PREFIX then
				local users = reservation_users(name)
				if list_has(users, user) then return slurm.SUCCESS, nil end
				if users == nil then
					why = "reservation " .. name .. " does not exist"
				else
					why = "reservation " .. name .. " is not granted to " .. tostring(user)
				end
			end
		end
		why = why or ("reservation " .. resv .. " is not a pilot_* reservation")
	end
	local shown = (limit == INFINITE) and "unlimited" or string.format("%.1f days", limit / 1440)
	local msg = string.format(
		"pilot: job rejected: time limit %s exceeds %d days without a pilot reservation (%s). " ..
		"Run a pilot (sbatch --pilot=CONFIG), read it with `pilot verdict JOBID`, and ask an " ..
		"administrator for `pilot grant`; then submit with --reservation=pilot_JOBID. See pilot(1).",
		shown, MAX_UNPILOTED_DAYS, why)
	return slurm.ERROR, msg
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local rc, msg = pilot_check(job_desc, part_list, submit_uid)
	if rc ~= slurm.SUCCESS then
		slurm.log_user(msg)
		slurm.log_info("pilot: rejected job of uid %d: %s", submit_uid, msg)
	end
	return rc
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if modify_uid == 0 then return slurm.SUCCESS end  -- administrators
	-- Extending a running job's time limit past the limit needs the same grant.
	if job_desc.time_limit ~= nil and job_desc.time_limit ~= NO_VAL then
		local d = {
			time_limit = job_desc.time_limit,
			reservation = job_desc.reservation or job_rec.resv_name,
			user_name = job_desc.user_name or job_rec.user_name,
		}
		local rc, msg = pilot_check(d, part_list, modify_uid)
		if rc ~= slurm.SUCCESS then
			slurm.log_user(msg)
			return rc
		end
	end
	return slurm.SUCCESS
end

return slurm.SUCCESS
